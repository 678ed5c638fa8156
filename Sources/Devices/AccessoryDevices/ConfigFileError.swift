import AccessoryTransport

/// What was wrong with a settings file (``ConfigFile``): every message starts with the file and
/// line (`path:line:`) and says what the line should have been.
public struct ConfigFileError: AccessoryError, Hashable {
    /// A stable, machine-readable identifier. New codes may be added; existing ones never change.
    public struct Code: AccessoryErrorCode {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// A line that is neither `key = value`, a comment, nor a section header.
        public static let malformedLine = Code(rawValue: "malformed-line")
        /// A section header (`[usb VID:PID]`, `[bridge NAME]`) that could not be parsed, or a
        /// second section of the same name.
        public static let invalidSection = Code(rawValue: "invalid-section")
        /// A key the file's format (or the section) does not know: a typo is never ignored.
        public static let unknownSetting = Code(rawValue: "unknown-setting")
        /// A known key with a value it cannot take.
        public static let invalidValue = Code(rawValue: "invalid-value")
        /// A section without a setting it must have (a bridge's `device` or `listen`).
        public static let missingSetting = Code(rawValue: "missing-setting")
    }

    public let code: Code
    public let message: String
    /// Always nil: a settings file's errors have no cause below them.
    public var underlying: (any Error)? { nil }

    /// An error with `code` and a message for people.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}
