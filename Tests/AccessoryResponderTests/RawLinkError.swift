/// Why the raw test client gave up.
struct RawLinkError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
