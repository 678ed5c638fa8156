import AccessoryTransport

/// The one public error type of the HTTP/1.1 framing layer: a stable ``Code`` for programs and a
/// readable message for people, saying what went wrong on the link and what to do about it.
public struct HTTPLinkError: AccessoryError {
    /// A stable, machine-readable identifier. New codes may be added; existing ones never change.
    public struct Code: AccessoryErrorCode {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The caller's request cannot be sent as given (CR/LF/NUL in a header, a bad path…).
        /// Nothing was written to the link.
        public static let invalidRequest = Code(rawValue: "invalid-request")
        /// The device sent bytes that are not a valid HTTP/1.1 response.
        public static let malformedResponse = Code(rawValue: "malformed-response")
        /// The device's response head exceeded a configured limit (status line, header size or
        /// count): a protocol fault of the device.
        public static let responseTooLarge = Code(rawValue: "response-too-large")
        /// The response body is larger than the limit the caller set for collecting it: the
        /// device did nothing wrong; raise the limit or stream the body.
        public static let responseBodyTooLarge = Code(rawValue: "response-body-too-large")
        /// The device closed the link before the response was complete.
        public static let linkClosed = Code(rawValue: "link-closed")
        /// The device sent nothing for longer than the idle timeout while a response was due.
        public static let idleTimeout = Code(rawValue: "idle-timeout")
        /// The transport ended the link because the device took nothing written to it for
        /// longer than the transport's write timeout: it stopped reading (a USB device whose OUT
        /// transfers did not come back). `underlying` is the `TransportError`
        /// (`write-timed-out`) the transport ended the stream with.
        public static let writeTimeout = Code(rawValue: "write-timeout")
        /// The whole exchange took longer than allowed.
        public static let exchangeTimeout = Code(rawValue: "exchange-timeout")
        /// Opening the byte stream pair did not finish in time.
        public static let openTimeout = Code(rawValue: "open-timeout")
        /// The transport could not open the byte stream pair; `underlying` is a `TransportError`.
        public static let transportFailed = Code(rawValue: "transport-failed")
        /// The device sent bytes while no request was outstanding: the link was out of step.
        public static let strayBytes = Code(rawValue: "stray-bytes")
        /// The caller's request body source threw, so the request could not be completed.
        public static let requestBodyFailed = Code(rawValue: "request-body-failed")
        /// The exchange was cancelled by the caller.
        public static let cancelled = Code(rawValue: "cancelled")
        /// The link was shut down by its owner.
        public static let shutDown = Code(rawValue: "shut-down")
    }

    public let code: Code
    public let message: String
    /// The error that caused this one, if any (a `TransportError`, an NIO parser error…).
    public let underlying: (any Error)?

    /// An error with the given code and message.
    ///
    /// - Parameters:
    ///   - code: what went wrong, for programs.
    ///   - message: what went wrong on the link and what to do about it, for people.
    ///   - underlying: the error that caused this one, if any; `nil` by default.
    public init(_ code: Code, _ message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    /// Whether retrying the same request on a fresh link could reasonably succeed.
    public var isTransient: Bool {
        switch self.code {
        case .linkClosed, .idleTimeout, .writeTimeout, .strayBytes, .openTimeout: return true
        default: return false
        }
    }
}

extension HTTPLinkError {
    static func appendingDiagnostics(_ error: HTTPLinkError, _ diagnostics: String?) -> HTTPLinkError {
        guard let diagnostics, !diagnostics.isEmpty else { return error }
        return HTTPLinkError(error.code, "\(error.message) (\(diagnostics))", underlying: error.underlying)
    }
}
