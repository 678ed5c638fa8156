import HTTPTypes

/// What a request head says about its body and about the link.
struct RequestFraming: Sendable {
    /// The `Content-Length`, when present and valid.
    var contentLength: Int?
    /// Whether a body follows the head at all.
    var hasBody: Bool
    /// `Expect: 100-continue` was sent with a body.
    var expectsContinue: Bool
    /// The client asked to close the link after this exchange.
    var wantsClose: Bool

    /// - Parameter http2: the request came on an HTTP/2 stream, whose end the stream marks: it
    ///   may have a body without any Content-Length (an empty one ends at once).
    init(_ head: HTTPRequest, http2: Bool = false) {
        let fields = head.headerFields
        let chunked = fields[.transferEncoding] != nil
        let length = fields[.contentLength].flatMap { Int($0) }
        self.contentLength = chunked ? nil : length
        self.hasBody = chunked || (length ?? 0) > 0 || (http2 && length == nil)
        self.expectsContinue =
            self.hasBody
            && fields[.expect].map { $0.lowercased() == "100-continue" } == true
        self.wantsClose = fields.containsToken("close", in: .connection)
    }
}

extension HTTPFields {
    /// Whether the comma-separated list in the fields named `name` holds `token`
    /// (case-insensitive), e.g. `close` in `Connection: keep-alive, Close`.
    func containsToken(_ token: String, in name: HTTPField.Name) -> Bool {
        for value in self[values: name] {
            for element in value.split(separator: ",") {
                let trimmed = element.trimmingWhitespace()
                if trimmed.count == token.count && trimmed.lowercased() == token { return true }
            }
        }
        return false
    }
}

extension Substring {
    func trimmingWhitespace() -> Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result.removeFirst() }
        while let last = result.last, last == " " || last == "\t" { result.removeLast() }
        return result
    }
}
