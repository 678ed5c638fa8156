/// Accessories for `accessory-http bridge` in the config file: a `[bridge NAME]` line starts a
/// section whose `key = value` lines describe one accessory and where clients reach it, until
/// the next section. `listen` may be given more than once.
///
/// ```
/// [bridge printer]
/// device = usb:1209:0001
/// listen = unix:/run/accessory-http/printer.sock
/// listen = tcp:127.0.0.1:8080
/// idle-release = 2
/// ```
struct BridgeSection: Equatable, Sendable {
    /// The section's name: the accessory's name in logs and in the status document.
    var name: String
    var device: String?
    var listen: [String] = []
    var host: String?
    var queueTimeout: Double?
    var responseTimeout: Double?
    var idleRelease: Double?
    var clientIdleTimeout: Double?
    var grace: Double?
    var socketMode: String?
    var socketGroup: String?
    var allowRemote = false
    /// Where the section starts (`path:line`), for error messages.
    var location: String

    static let knownKeys =
        "device, listen, host, queue-timeout, response-timeout, idle-release, client-idle-timeout, grace, socket-mode, socket-group, allow-remote"

    mutating func set(_ key: String, _ value: String, at location: String) throws(CLIError) {
        let context = "\(location): [bridge \(self.name)]"
        switch key {
        case "device": self.device = value
        case "listen": self.listen.append(value)
        case "host": self.host = value
        case "queue-timeout": self.queueTimeout = try Self.seconds(value, key, context)
        case "response-timeout": self.responseTimeout = try Self.seconds(value, key, context)
        case "idle-release": self.idleRelease = try Self.seconds(value, key, context)
        case "client-idle-timeout": self.clientIdleTimeout = try Self.seconds(value, key, context)
        case "grace": self.grace = try Self.seconds(value, key, context)
        case "socket-mode": self.socketMode = value
        case "socket-group": self.socketGroup = value
        case "allow-remote":
            switch value {
            case "yes", "true", "on": self.allowRemote = true
            case "no", "false", "off": self.allowRemote = false
            default: throw CLIError(.usage, "\(context): allow-remote must be yes or no, not \"\(value)\"")
            }
        default:
            throw CLIError(.usage, "\(context): unknown setting \"\(key)\" (known: \(Self.knownKeys))")
        }
    }

    /// What a section must have: a device and at least one listener.
    func validate() throws(CLIError) {
        guard self.device != nil else {
            throw CLIError(.usage, "\(self.location): [bridge \(self.name)] has no 'device = SPEC'")
        }
        guard !self.listen.isEmpty else {
            throw CLIError(
                .usage,
                "\(self.location): [bridge \(self.name)] has no 'listen = unix:PATH' (or tcp:127.0.0.1:PORT)"
            )
        }
    }

    private static func seconds(_ value: String, _ key: String, _ context: String) throws(CLIError) -> Double {
        guard let seconds = Double(value), seconds > 0, seconds <= 86_400 else {
            throw CLIError(.usage, "\(context): \(key) must be a number of seconds from 0 to 86400, not \"\(value)\"")
        }
        return seconds
    }

    /// Equal when they say the same; where the section sits in the file is not part of that.
    static func == (lhs: BridgeSection, rhs: BridgeSection) -> Bool {
        lhs.name == rhs.name && lhs.device == rhs.device && lhs.listen == rhs.listen && lhs.host == rhs.host
            && lhs.queueTimeout == rhs.queueTimeout && lhs.responseTimeout == rhs.responseTimeout
            && lhs.idleRelease == rhs.idleRelease && lhs.clientIdleTimeout == rhs.clientIdleTimeout
            && lhs.grace == rhs.grace && lhs.socketMode == rhs.socketMode && lhs.socketGroup == rhs.socketGroup
            && lhs.allowRemote == rhs.allowRemote
    }
}

extension ConfigFile {
    /// Parses `[bridge NAME]` (a name of letters, digits, `-`, `_` and `.`).
    static func bridgeSection(_ line: String, at location: String) throws(CLIError) -> String {
        let inner = String(line.dropFirst().dropLast()).trimmingSpaces()
        let words = inner.split(separator: " ", omittingEmptySubsequences: true)
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
        guard line.hasSuffix("]"), words.count == 2, words[0] == "bridge", words[1].allSatisfy(allowed.contains)
        else {
            throw CLIError(
                .usage,
                "\(location): expected a section '[bridge NAME]' (letters, digits, '-', '_', '.'), found \"\(line)\""
            )
        }
        return String(words[1])
    }
}
