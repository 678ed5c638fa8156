import HTTPTypes

/// A request as the handler sees it: the head, and the body still streaming in.
public struct ResponderRequest: Sendable {
    /// The request line and header fields. The `Host` header is in `head.authority`.
    public var head: HTTPRequest
    /// The request body; read it at most once.
    public var body: RequestBody

    /// Creates a request, for instance to call a handler directly in a test.
    public init(head: HTTPRequest, body: RequestBody = RequestBody()) {
        self.head = head
        self.body = body
    }
}
