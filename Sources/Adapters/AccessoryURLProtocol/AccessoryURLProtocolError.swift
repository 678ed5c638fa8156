import AccessoryTransport
import Foundation

/// An error ``AccessoryURLProtocol`` reports itself (as opposed to a `URLError` mapped from a
/// transfer failure). It reaches the caller of URLSession unchanged.
public struct AccessoryURLProtocolError: AccessoryError, LocalizedError {
    /// A stable identifier; existing codes never change.
    public struct Code: AccessoryErrorCode {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// A download task: FoundationNetworking cannot complete one from a custom protocol.
        /// Use `AccessoryClient.download(_:to:progress:)`.
        public static let downloadNotSupported = Code(rawValue: "download-not-supported")
        /// An upload task whose body FoundationNetworking does not hand to custom protocols.
        /// Use `AccessoryClient.upload(_:fromFile:)`, or a data task with `httpBody`/`httpBodyStream`.
        public static let uploadBodyNotSupported = Code(rawValue: "upload-body-not-supported")
        /// The URL asks for TLS (`accessorys://`) but its route has no TLS configuration.
        public static let tlsNotConfigured = Code(rawValue: "tls-not-configured")
        /// No route serves the URL, or the route's device cannot be opened.
        public static let routeUnavailable = Code(rawValue: "route-unavailable")
        /// The request cannot be expressed over the link (bad URL, header or path).
        public static let invalidRequest = Code(rawValue: "invalid-request")
        /// `httpBodyStream` cannot be read again for a 307/308 redirect or an authentication retry.
        public static let bodyStreamNotReplayable = Code(rawValue: "body-stream-not-replayable")
    }

    public let code: Code
    public let message: String
    /// The error that caused this one, if any.
    public let underlying: (any Error)?

    /// An error with the given code and message.
    ///
    /// - Parameters:
    ///   - code: What went wrong, for programs.
    ///   - message: What went wrong and what to do about it, for people; also the
    ///     `errorDescription`.
    ///   - underlying: The error that caused this one, if any; `nil` by default.
    public init(_ code: Code, _ message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    public var errorDescription: String? { self.message }
}
