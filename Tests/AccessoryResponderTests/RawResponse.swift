/// A response exactly as it came off the wire, parsed by ``RawLink``.
struct RawResponse: Sendable {
    var status: Int
    var reason: String
    /// Header fields in wire order, names as sent.
    var headers: [(name: String, value: String)]
    var body: [UInt8]
    /// How many chunks a chunked body came in (0 when not chunked).
    var chunkCount: Int

    /// The first value of a header, by case-insensitive name.
    func header(_ name: String) -> String? {
        self.headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    var bodyText: String { String(decoding: self.body, as: UTF8.self) }
}
