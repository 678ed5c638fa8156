/// Two elements as a collection, so a head and a body part can be written with one flush
/// without allocating an array.
struct CollectionOfTwo<Element>: RandomAccessCollection {
    let first: Element
    let second: Element

    init(_ first: Element, _ second: Element) {
        self.first = first
        self.second = second
    }

    var startIndex: Int { 0 }
    var endIndex: Int { 2 }

    subscript(position: Int) -> Element {
        position == 0 ? self.first : self.second
    }
}

extension CollectionOfTwo: Sendable where Element: Sendable {}
