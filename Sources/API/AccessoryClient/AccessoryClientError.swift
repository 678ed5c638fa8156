import AccessoryHTTP1
import AccessoryTLS
import AccessoryTransport

/// The one public error type of the client: a stable ``Code`` for programs and a readable
/// message that says what was wrong and what to do.
public struct AccessoryClientError: AccessoryError {
    /// A stable, machine-readable identifier. New codes may be added; existing ones never change.
    public struct Code: AccessoryErrorCode {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

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
        /// The accessory's TLS certificate was not trusted: unknown issuer, wrong name, no pin
        /// or pairing matched, a paired key changed. The `TLSError` (``tlsError``) says which.
        public static let tlsUntrusted = Code(rawValue: "tls-untrusted")
        /// The TLS handshake or a TLS record failed for another reason: no shared version or
        /// cipher, a client certificate required or rejected, a truncated stream.
        public static let tlsFailed = Code(rawValue: "tls-failed")
        /// The TLS configuration cannot be used: an unreadable certificate or key, a wrong
        /// PKCS#12 password, an unusable expected name, a trust store others can write.
        public static let tlsConfiguration = Code(rawValue: "tls-configuration")
    }

    public let code: Code
    public let message: String
    /// The lower-level error, if any (`HTTPLinkError`, `TransportError`, …).
    public let underlying: (any Error)?

    /// An error with the given code and message.
    ///
    /// - Parameters:
    ///   - code: what went wrong, for programs.
    ///   - message: what was wrong and what to do, for people.
    ///   - underlying: the lower-level error that caused this one, if any; `nil` by default.
    public init(_ code: Code, _ message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    /// The `TLSError` that caused this error, if TLS did.
    public var tlsError: TLSError? { self.cause(TLSError.self) }

    /// Why a redirect was not followed, for ``Code/redirectFailed``.
    public var redirectFailure: RedirectFailure? { self.cause(RedirectFailure.self) }

    /// Wraps any error thrown below the client (link, transport, TLS, cancellation) into this
    /// type, classified by the types and codes of the errors below, never by their messages.
    public static func wrapping(_ error: any Error) -> AccessoryClientError {
        if let error = error as? AccessoryClientError { return error }
        if let tls = Self.tlsCause(of: error) {
            return AccessoryClientError(Self.code(for: tls), tls.message, underlying: error)
        }
        if let error = error as? HTTPLinkError {
            let code: Code
            switch error.code {
            case .invalidRequest: code = .invalidRequest
            case .malformedResponse, .strayBytes: code = .protocolError
            case .responseBodyTooLarge: code = .responseTooLarge
            case .responseTooLarge: code = .protocolError
            case .linkClosed, .transportFailed: code = .transportFailed
            case .idleTimeout, .writeTimeout, .exchangeTimeout, .openTimeout: code = .timedOut
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
        if let error = error as? TLSError {
            return AccessoryClientError(Self.code(for: error), error.message, underlying: error)
        }
        if error is CancellationError {
            return AccessoryClientError(.cancelled, "the request was cancelled", underlying: error)
        }
        return AccessoryClientError(.transportFailed, "\(error)", underlying: error)
    }
}

extension AccessoryClientError {
    /// The TLS error under `error`, when the link failed because of TLS.
    fileprivate static func tlsCause(of error: any Error) -> TLSError? {
        if let tls = error as? TLSError { return tls }
        return (error as? any AccessoryError)?.cause(TLSError.self)
    }

    fileprivate static func code(for tls: TLSError) -> Code {
        switch tls.code {
        case .untrustedCertificate, .nameMismatch, .pinMismatch, .pairingMismatch, .noIdentity:
            return .tlsUntrusted
        case .invalidConfiguration, .trustStoreError:
            return .tlsConfiguration
        default:
            return .tlsFailed
        }
    }
}
