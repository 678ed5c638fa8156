/// The one public error type of the transport layer: a stable ``Code`` for programs and a
/// readable message for people that says what was wrong and what to do.
public struct TransportError: AccessoryError, Hashable {
    /// A stable, machine-readable identifier. New codes may be added; existing ones never change.
    public struct Code: AccessoryErrorCode {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The device spec could not be parsed.
        public static let invalidDeviceSpec = Code(rawValue: "invalid-device-spec")
        /// The path or device does not exist.
        public static let deviceNotFound = Code(rawValue: "device-not-found")
        /// Another process holds the device (exclusive open, lock, or claimed interface).
        public static let deviceBusy = Code(rawValue: "device-busy")
        /// The current user may not open the device.
        public static let permissionDenied = Code(rawValue: "permission-denied")
        /// The path exists but is not the kind of file the spec asked for (e.g. not a tty).
        public static let wrongKindOfFile = Code(rawValue: "wrong-kind-of-file")
        /// A serial setting (baud rate, data bits, …) is not supported by the device or system.
        public static let unsupportedSetting = Code(rawValue: "unsupported-setting")
        /// Connecting or opening failed for another reason.
        public static let openFailed = Code(rawValue: "open-failed")
        /// Opening did not finish within the allowed time.
        public static let openTimedOut = Code(rawValue: "open-timed-out")
        /// A child process could not be started, or exited.
        public static let processFailed = Code(rawValue: "process-failed")
        /// The transport is recognised but not available in this build or on this system.
        public static let unsupported = Code(rawValue: "unsupported")
        /// The USB device does not speak Android Open Accessory (GET_PROTOCOL failed or
        /// answered 0), so it cannot be switched into accessory mode.
        public static let accessoryModeUnsupported = Code(rawValue: "accessory-mode-unsupported")
        /// The device took nothing of what was written for longer than the transport's write
        /// timeout, and the transport ended the stream: it stopped reading (a USB device whose
        /// OUT transfers did not come back; the `write-timeout` quirk key sets the time).
        public static let writeTimedOut = Code(rawValue: "write-timed-out")
    }

    public let code: Code
    public let message: String
    /// The error that caused this one, if any.
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

    /// Equal when code and message are (the underlying error is not compared).
    public static func == (lhs: TransportError, rhs: TransportError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.code)
        hasher.combine(self.message)
    }
}
