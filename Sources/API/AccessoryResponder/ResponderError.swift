import AccessoryTransport

/// The one public error type of the responder: a stable ``Code`` for programs and a readable
/// message for people.
public struct ResponderError: AccessoryError, Hashable {
    /// A stable, machine-readable identifier. New codes may be added; existing ones never change.
    public struct Code: AccessoryErrorCode {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The request could not be parsed as HTTP/1.1.
        public static let malformedRequest = Code(rawValue: "malformed-request")
        /// The request head exceeded ``ResponderConfiguration/maxHeaderBlockSize`` or
        /// ``ResponderConfiguration/maxHeaderCount``.
        public static let headersTooLarge = Code(rawValue: "headers-too-large")
        /// ``RequestBody/collect(upTo:)`` met a body larger than its limit, or the body passed
        /// ``ResponderConfiguration/maxRequestBodySize`` (answered with 413).
        public static let bodyTooLarge = Code(rawValue: "body-too-large")
        /// The request body was read after its exchange ended, or from two tasks at once.
        public static let bodyUnavailable = Code(rawValue: "body-unavailable")
        /// The peer closed the link before the request body ended.
        public static let connectionClosed = Code(rawValue: "connection-closed")
        /// A streamed response body did not match the length it declared.
        public static let responseLengthMismatch = Code(rawValue: "response-length-mismatch")
        /// A ``ResponseBodyWriter`` was used after its response ended.
        public static let responseFinished = Code(rawValue: "response-finished")
        /// Trailer fields were set on a response body declared with a length (only a body of
        /// unknown length, sent chunked on HTTP/1.1, can carry them).
        public static let trailersNotAllowed = Code(rawValue: "trailers-not-allowed")
        /// The responder could not attach to the descriptor, transport or socket path.
        public static let setupFailed = Code(rawValue: "setup-failed")
    }

    /// What went wrong, for programs.
    public let code: Code
    /// What went wrong, for people.
    public let message: String

    /// The error that caused this one, if any.
    public let underlying: (any Error)?

    /// Creates an error with a code, a readable message and the error that caused it.
    public init(_ code: Code, _ message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    /// Equal when code and message are (the underlying error is not compared).
    public static func == (lhs: ResponderError, rhs: ResponderError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.code)
        hasher.combine(self.message)
    }
}
