import AccessoryHTTP1
import AccessoryTransport

/// The one public error type of the client: a stable ``Code`` for programs and a readable
/// message that says what was wrong and what to do.
public struct AccessoryClientError: Error, Sendable, CustomStringConvertible {
    /// A stable, machine-readable identifier. New codes may be added; existing ones never change.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { self.rawValue }

        /// The request is invalid as given (bad URL, header, path); nothing was sent.
        public static let invalidRequest = Code(rawValue: "invalid-request")
        /// The device could not be reached: it could not be opened, or the link broke.
        public static let transportFailed = Code(rawValue: "transport-failed")
        /// Opening, the device's silence, or the whole exchange exceeded its timeout.
        public static let timedOut = Code(rawValue: "timed-out")
        /// The device answered with something that is not valid HTTP/1.1, or broke a limit.
        public static let protocolError = Code(rawValue: "protocol-error")
        /// A redirect could not be followed (limit, cycle, another accessory, bad Location).
        public static let redirectFailed = Code(rawValue: "redirect-failed")
        /// The response body exceeded the size the caller allowed.
        public static let responseTooLarge = Code(rawValue: "response-too-large")
        /// A local file could not be read or written.
        public static let fileError = Code(rawValue: "file-error")
        /// The request body source failed.
        public static let requestBodyFailed = Code(rawValue: "request-body-failed")
        /// The caller cancelled the request.
        public static let cancelled = Code(rawValue: "cancelled")
        /// The client was shut down.
        public static let shutDown = Code(rawValue: "shut-down")
    }

    public let code: Code
    public let message: String
    /// The lower-level error, if any (`HTTPLinkError`, `TransportError`, …).
    public let underlying: (any Error)?

    public init(_ code: Code, _ message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    public var description: String { self.message }

    /// Wraps any error thrown below the client (link, transport, cancellation) into this type.
    public static func wrapping(_ error: any Error) -> AccessoryClientError {
        if let error = error as? AccessoryClientError { return error }
        if let error = error as? HTTPLinkError {
            let code: Code
            switch error.code {
            case .invalidRequest: code = .invalidRequest
            case .malformedResponse, .strayBytes: code = .protocolError
            case .responseBodyTooLarge: code = .responseTooLarge
            case .responseTooLarge: code = .protocolError
            case .linkClosed, .transportFailed: code = .transportFailed
            case .idleTimeout, .exchangeTimeout, .openTimeout: code = .timedOut
            case .requestBodyFailed: code = .requestBodyFailed
            case .cancelled: code = .cancelled
            case .shutDown: code = .shutDown
            default: code = .protocolError
            }
            return AccessoryClientError(code, error.message, underlying: error)
        }
        if let error = error as? TransportError {
            return AccessoryClientError(.transportFailed, error.message, underlying: error)
        }
        if error is CancellationError {
            return AccessoryClientError(.cancelled, "the request was cancelled", underlying: error)
        }
        return AccessoryClientError(.transportFailed, "\(error)", underlying: error)
    }
}
