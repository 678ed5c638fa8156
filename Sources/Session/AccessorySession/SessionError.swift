import AccessoryTransport

/// The one public error type of the session layer (docs/framing.md §5): a stable ``Code`` and a
/// message that says what happened on the line and what to do.
public struct SessionError: AccessoryError {
    /// A stable, machine-readable identifier. New codes may be added; existing ones never change.
    public struct Code: AccessoryErrorCode {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The device did not answer HELLO in time: it does not speak sessions, or is not there.
        public static let handshakeTimeout = Code(rawValue: "session-handshake-timeout")
        /// Bytes arrived that are not a valid frame, or a frame was lost or repeated.
        public static let integrity = Code(rawValue: "session-integrity")
        /// A valid frame broke a rule of the protocol (a HELLO sent to the host, say).
        public static let protocolViolation = Code(rawValue: "session-protocol")
        /// Another host process started its own session on the line.
        public static let sessionLost = Code(rawValue: "session-lost")
        /// The device ended the session with CLOSE.
        public static let closedByDevice = Code(rawValue: "session-closed")
        /// Nothing arrived for twice the ping interval: the device is gone or hung.
        public static let peerDead = Code(rawValue: "session-peer-dead")
    }

    public let code: Code
    public let message: String
    public let underlying: (any Error)?

    /// An error with the given code and message.
    ///
    /// - Parameters:
    ///   - code: what went wrong, for programs.
    ///   - message: what happened on the line and what to do, for people.
    ///   - underlying: the error that caused this one, if any; `nil` by default.
    public init(_ code: Code, _ message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }
}

/// A session error ends the stream the HTTP link runs on, never the transport: the link fails
/// the exchange as `link-closed` (and retries it where docs/framing.md §5 says) and starts a new
/// session.
extension SessionError: StreamEndingError {}
