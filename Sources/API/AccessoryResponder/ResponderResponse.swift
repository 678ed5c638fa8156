import HTTPTypes
import NIOCore

/// A response as the handler returns it.
///
/// The responder adds the framing: `Content-Length` when the length is known, chunked
/// transfer coding otherwise. Responses to `HEAD`, and `204`/`304` responses, are sent without
/// a body (a streamed body's closure is then not called).
public struct ResponderResponse: Sendable {
    /// How the response body is produced.
    public enum Body: Sendable {
        /// No body (`Content-Length: 0` where a body is allowed).
        case empty
        /// A body already in memory; it is sent with the head in one write.
        case bytes(ByteBuffer)
        /// A body produced while it is sent. With a `length` the response carries
        /// `Content-Length` and the closure must write exactly that many bytes; with `nil` the
        /// body is sent chunked.
        case stream(length: Int?, @Sendable (ResponseBodyWriter) async throws -> Void)
    }

    /// The status line and header fields.
    public var head: HTTPResponse
    /// The body.
    public var body: Body

    /// Creates a response.
    public init(head: HTTPResponse, body: Body = .empty) {
        self.head = head
        self.body = body
    }

    /// Creates a response with a status, header fields and a body.
    public init(status: HTTPResponse.Status, headerFields: HTTPFields = [:], body: Body = .empty) {
        self.head = HTTPResponse(status: status, headerFields: headerFields)
        self.body = body
    }
}

// The body types, by the name of what they belong to: one place to look for each side.

extension ResponderRequest {
    /// The body of a request the responder received (``RequestBody``).
    public typealias Body = RequestBody
}

extension ResponderResponse.Body {
    /// What a streamed response body's producer writes to (``ResponseBodyWriter``).
    public typealias Writer = ResponseBodyWriter
}
