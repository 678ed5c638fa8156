/// Three elements as a collection, so head, body and end of a small response leave with one
/// flush without allocating an array.
struct CollectionOfThree<Element>: RandomAccessCollection {
    let first: Element
    let second: Element
    let third: Element

    init(_ first: Element, _ second: Element, _ third: Element) {
        self.first = first
        self.second = second
        self.third = third
    }

    var startIndex: Int { 0 }
    var endIndex: Int { 3 }

    subscript(position: Int) -> Element {
        switch position {
        case 0: return self.first
        case 1: return self.second
        default: return self.third
        }
    }
}

extension CollectionOfThree: Sendable where Element: Sendable {}
