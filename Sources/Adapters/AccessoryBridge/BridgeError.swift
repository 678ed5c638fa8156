import AccessoryTransport

/// The one public error type of the bridge: a stable ``Code`` and a message that says what was
/// wrong and what to do.
public struct BridgeError: AccessoryError {
    /// A stable, machine-readable identifier. New codes may be added; existing ones never change.
    public struct Code: AccessoryErrorCode {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// A `--listen` value is not `unix:PATH` or `tcp:HOST:PORT`.
        public static let invalidListener = Code(rawValue: "invalid-listener")
        /// A TCP listener on an address other than loopback without `allowRemote`.
        public static let remoteNotAllowed = Code(rawValue: "remote-not-allowed")
        /// A listener could not be bound: the address is in use, the directory missing, no permission.
        public static let bindFailed = Code(rawValue: "bind-failed")
        /// Another process owns the accessory or the socket path.
        public static let alreadyOwned = Code(rawValue: "already-owned")
        /// DNS-SD advertisement was required (``DNSSDConfiguration/Mode/on``) but its publisher
        /// program is not installed.
        public static let dnsSDUnavailable = Code(rawValue: "dns-sd-unavailable")
    }

    public let code: Code
    public let message: String
    public let underlying: (any Error)?

    /// An error with the given code and message.
    ///
    /// - Parameters:
    ///   - code: What went wrong, for programs.
    ///   - message: What went wrong and what to do about it, for people.
    ///   - underlying: The error that caused this one, if any; `nil` by default.
    public init(_ code: Code, _ message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }
}
