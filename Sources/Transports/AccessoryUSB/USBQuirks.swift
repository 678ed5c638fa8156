import AccessoryTransport

/// Per-device settings for accessories that need them, keyed by VID:PID in the config file:
///
/// ```
/// [usb 1209:0001]
/// zlp = off
/// max-transfer-size = 8192
/// claim-delay = 0.5
/// title-case-headers = yes
/// max-interfaces = 1
/// reset-on-open = yes
/// init-delay = 0.5
/// write-timeout = 30
/// ```
public struct USBQuirks: Sendable, Hashable {
    /// Send a zero-length packet after writes that fill whole packets (`zlp`, default on).
    public var zeroLengthPackets: Bool?
    /// The largest transfer in bytes (`max-transfer-size`, default 16384).
    public var maxTransferSize: Int?
    /// Transfers kept in flight each way (`transfers-in-flight`, default 8).
    public var transfersInFlight: Int?
    /// How long to wait after claiming the interface before the first transfer (`claim-delay`,
    /// written in seconds, with millisecond precision).
    public var claimDelay: Duration?
    /// Send header names in Title-Case (`title-case-headers`); some devices only accept that.
    /// Applied by whoever builds the link (`LinkConfiguration.titleCaseHeaderNames`).
    public var titleCaseHeaderNames: Bool?
    /// Use at most this many qualifying interfaces (`max-interfaces`).
    public var maxInterfaces: Int?
    /// Interface classes that qualify (`interface-class = ff/48/01`; repeatable, comma-separated).
    public var interfaceClasses: [USBInterfaceClass]?
    /// Reset the device's port before claiming it (`reset-on-open`, like ipp-usb's
    /// `init-reset`): cures devices that stop answering after power save. The reset is the
    /// whole device's: a link this process holds on another of its interfaces ends with it.
    public var resetOnOpen: Bool?
    /// How long to wait after opening (and resetting) the device before claiming it
    /// (`init-delay`, written in seconds, with millisecond precision).
    public var initDelay: Duration?
    /// How long writes may wait without the device taking a transfer before the link fails
    /// (`write-timeout`, written in seconds with millisecond precision; 0 waits forever).
    public var writeTimeout: Duration?

    /// No quirks: every setting is `nil`, so the transport's own defaults apply.
    public init() {}

    /// The keys a `[usb VID:PID]` section accepts.
    public static let keys = [
        "zlp", "max-transfer-size", "claim-delay", "title-case-headers", "max-interfaces", "interface-class",
        "reset-on-open", "init-delay", "transfers-in-flight", "write-timeout",
    ]

    /// Sets one `key = value` line of a `[usb VID:PID]` section.
    ///
    /// - Throws: a message that names the key and the accepted values.
    public mutating func set(_ key: String, to value: String) throws(USBQuirkError) {
        switch key {
        case "zlp":
            self.zeroLengthPackets = try Self.boolean(key, value)
        case "title-case-headers":
            self.titleCaseHeaderNames = try Self.boolean(key, value)
        case "reset-on-open":
            self.resetOnOpen = try Self.boolean(key, value)
        case "max-transfer-size":
            guard value.allSatisfy(\.isASCII), let size = Int(value), size >= 64, size <= 1 << 20 else {
                throw USBQuirkError("max-transfer-size must be a number of bytes from 64 to 1048576, not \"\(value)\"")
            }
            self.maxTransferSize = size
        case "claim-delay", "init-delay":
            let delay = try Self.milliseconds(key, value, upTo: 60, range: "from 0 to 60")
            if key == "claim-delay" { self.claimDelay = delay } else { self.initDelay = delay }
        case "write-timeout":
            let timeout = try Self.milliseconds(key, value, upTo: 3600, range: "from 0 (never) to 3600")
            // A timeout too short to count in milliseconds is the shortest one, not "never".
            self.writeTimeout = timeout == .zero && Double(value) != 0 ? .milliseconds(1) : timeout
        case "transfers-in-flight":
            guard value.allSatisfy(\.isASCII), let count = Int(value), count >= 1, count <= 32 else {
                throw USBQuirkError("transfers-in-flight must be a number from 1 to 32, not \"\(value)\"")
            }
            self.transfersInFlight = count
        case "max-interfaces":
            guard value.allSatisfy(\.isASCII), let count = Int(value), count >= 1, count <= 32 else {
                throw USBQuirkError("max-interfaces must be a number from 1 to 32, not \"\(value)\"")
            }
            self.maxInterfaces = count
        case "interface-class":
            var classes: [USBInterfaceClass] = []
            for part in value.split(separator: ",") {
                let text = part.trimmingCharacters(in: " \t")
                guard let parsed = USBInterfaceClass(parsing: text) else {
                    throw USBQuirkError(
                        "interface-class must be CC/SS/PP in hex, * for any (e.g. ff/48/01 or 07/01/04), not \"\(text)\""
                    )
                }
                classes.append(parsed)
            }
            guard !classes.isEmpty else { throw USBQuirkError("interface-class needs at least one CC/SS/PP") }
            self.interfaceClasses = (self.interfaceClasses ?? []) + classes
        default:
            throw USBQuirkError("unknown USB setting \"\(key)\" (known: \(Self.keys.joined(separator: ", ")))")
        }
    }

    /// Applies the quirks to a transfer policy.
    public func applied(to policy: USBTransferPolicy) -> USBTransferPolicy {
        var policy = policy
        if let zlp = self.zeroLengthPackets { policy.zeroLengthPackets = zlp }
        if let size = self.maxTransferSize { policy.maxTransferSize = size }
        if let count = self.transfersInFlight { policy.transfersInFlight = count }
        if let timeout = self.writeTimeout {
            // Whole milliseconds, clamped to what the policy holds: the property is public, so
            // any value may come.
            let (seconds, attoseconds) = timeout.components
            let bounded = min(max(seconds, 0), Int64(UInt32.max) / 1000 + 1)
            policy.writeTimeoutMilliseconds = UInt32(
                clamping: bounded * 1000 + attoseconds / 1_000_000_000_000_000
            )
        }
        return policy
    }

    /// Seconds, written with up to millisecond precision, from 0 to `limit`.
    private static func milliseconds(
        _ key: String,
        _ value: String,
        upTo limit: Double,
        range: String
    ) throws(USBQuirkError) -> Duration {
        guard let seconds = Double(value), seconds >= 0, seconds <= limit else {
            throw USBQuirkError("\(key) must be seconds \(range), not \"\(value)\"")
        }
        return .milliseconds(Int((seconds * 1000).rounded()))
    }

    private static func boolean(_ key: String, _ value: String) throws(USBQuirkError) -> Bool {
        switch value.lowercased() {
        case "on", "yes", "true", "1": return true
        case "off", "no", "false", "0": return false
        default: throw USBQuirkError("\(key) must be on or off, not \"\(value)\"")
        }
    }
}

/// A quirk line that could not be understood.
public struct USBQuirkError: AccessoryError, Hashable {
    /// The one code: `usb-quirk-invalid`.
    public struct Code: AccessoryErrorCode {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// A quirk line or value could not be understood.
        public static let invalidQuirk = Code(rawValue: "usb-quirk-invalid")
    }

    public var code: Code { .invalidQuirk }
    public let message: String
    public var underlying: (any Error)? { nil }
    /// An error with this message.
    ///
    /// - Parameter message: What is wrong with the line, for people.
    public init(_ message: String) { self.message = message }
}

extension StringProtocol {
    func trimmingCharacters(in set: String) -> String {
        guard let first = self.firstIndex(where: { !set.contains($0) }),
            let last = self.lastIndex(where: { !set.contains($0) })
        else { return "" }
        return String(self[first...last])
    }
}
