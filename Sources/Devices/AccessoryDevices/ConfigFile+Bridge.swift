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
///
/// TLS to the accessory is set per section with the command line's option names (`tls = yes`,
/// `tls-name`, `cacert`, `pin`, `cert`, `key`, `cert-password-file`, `tls-min-version`,
/// `tls-identity`); a section without any uses the command line's TLS options.
public struct BridgeSection: Equatable, Sendable {
    /// The section's name: the accessory's name in logs and in the status document.
    public var name: String
    /// `device = SPEC`: the accessory.
    public var device: String?
    /// `listen = unix:PATH` or `tcp:HOST:PORT`, each line one listener.
    public var listen: [String] = []
    /// `host = NAME`: the Host header the bridge sends.
    public var host: String?
    /// `queue-timeout = SECONDS`: how long a request may wait for the link before it is answered 503.
    public var queueTimeout: Double?
    /// `response-timeout = SECONDS`: how long the accessory may take to begin an answer (else 504).
    public var responseTimeout: Double?
    /// `idle-release = SECONDS`: release the device after this long without a request.
    public var idleRelease: Double?
    /// `client-idle-timeout = SECONDS`: how long a client connection may stay silent (else 408).
    public var clientIdleTimeout: Double?
    /// `grace = SECONDS`: how long exchanges under way may take to finish on SIGTERM.
    public var grace: Double?
    /// `socket-mode = OCTAL`: a unix listener's file mode.
    public var socketMode: String?
    /// `socket-group = NAME`: a unix listener's group.
    public var socketGroup: String?
    /// `allow-remote = yes|no`: whether a TCP listener may bind beyond loopback.
    public var allowRemote = false
    /// `dns-sd = auto|on|off`: DNS-SD advertisement of the section's reachable TCP listeners.
    public var dnsSD: String?
    /// `dns-sd-name = NAME`: the advertised instance name.
    public var dnsSDName: String?
    /// `tls = yes|no`: TLS to the accessory on or off for this section, whatever the command
    /// line says; `nil` when the section does not say.
    public var tls: Bool?
    /// The section's other TLS settings as the command line spells them, in file order:
    /// `tls-name = meter` is `["--tls-name", "meter"]` (`cacert` and `pin` may repeat). The CLI
    /// parses them with its own TLS options, so both accept and refuse the same values.
    public var tlsArguments: [String] = []
    /// Where the section starts (`path:line`), for error messages.
    public var location: String

    /// A section named `name` that starts at `location`, with `device` and nothing else set.
    public init(name: String, device: String? = nil, location: String) {
        self.name = name
        self.device = device
        self.location = location
    }

    static let knownKeys =
        "device, listen, host, queue-timeout, response-timeout, idle-release, client-idle-timeout, grace, socket-mode, socket-group, allow-remote, dns-sd, dns-sd-name, "
        + tlsKeys.joined(separator: ", ") + ", tls"

    /// The TLS settings a section may carry, named as the command line's options.
    static let tlsKeys = [
        "tls-name", "cacert", "pin", "cert", "key", "cert-password-file", "tls-min-version", "tls-identity",
    ]

    mutating func set(_ key: String, _ value: String, at location: String) throws(ConfigFileError) {
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
        case "allow-remote": self.allowRemote = try Self.yesOrNo(value, key, context)
        case "dns-sd":
            guard ["auto", "on", "off"].contains(value) else {
                throw ConfigFileError(.invalidValue, "\(context): dns-sd must be auto, on or off, not \"\(value)\"")
            }
            self.dnsSD = value
        case "dns-sd-name":
            guard !value.isEmpty else { throw ConfigFileError(.invalidValue, "\(context): dns-sd-name needs a value") }
            self.dnsSDName = value
        case "tls": self.tls = try Self.yesOrNo(value, key, context)
        case _ where Self.tlsKeys.contains(key):
            guard !value.isEmpty else {
                throw ConfigFileError(.invalidValue, "\(context): \(key) needs a value")
            }
            self.tlsArguments += ["--" + key, value]
        default:
            throw ConfigFileError(.unknownSetting, "\(context): unknown setting \"\(key)\" (known: \(Self.knownKeys))")
        }
    }

    /// What a section must have: a device and at least one listener.
    func validate() throws(ConfigFileError) {
        guard self.device != nil else {
            throw ConfigFileError(.missingSetting, "\(self.location): [bridge \(self.name)] has no 'device = SPEC'")
        }
        guard !self.listen.isEmpty else {
            throw ConfigFileError(
                .missingSetting,
                "\(self.location): [bridge \(self.name)] has no 'listen = unix:PATH' (or tcp:127.0.0.1:PORT)"
            )
        }
    }

    private static func yesOrNo(_ value: String, _ key: String, _ context: String) throws(ConfigFileError) -> Bool {
        switch value {
        case "yes", "true", "on": return true
        case "no", "false", "off": return false
        default: throw ConfigFileError(.invalidValue, "\(context): \(key) must be yes or no, not \"\(value)\"")
        }
    }

    private static func seconds(_ value: String, _ key: String, _ context: String) throws(ConfigFileError) -> Double {
        guard let seconds = Double(value), seconds > 0, seconds <= 86_400 else {
            throw ConfigFileError(
                .invalidValue,
                "\(context): \(key) must be a number of seconds from 0 to 86400, not \"\(value)\""
            )
        }
        return seconds
    }

    /// Equal when they say the same; where the section sits in the file is not part of that.
    public static func == (lhs: BridgeSection, rhs: BridgeSection) -> Bool {
        lhs.name == rhs.name && lhs.device == rhs.device && lhs.listen == rhs.listen && lhs.host == rhs.host
            && lhs.queueTimeout == rhs.queueTimeout && lhs.responseTimeout == rhs.responseTimeout
            && lhs.idleRelease == rhs.idleRelease && lhs.clientIdleTimeout == rhs.clientIdleTimeout
            && lhs.grace == rhs.grace && lhs.socketMode == rhs.socketMode && lhs.socketGroup == rhs.socketGroup
            && lhs.allowRemote == rhs.allowRemote && lhs.tls == rhs.tls && lhs.tlsArguments == rhs.tlsArguments
            && lhs.dnsSD == rhs.dnsSD && lhs.dnsSDName == rhs.dnsSDName
    }
}

extension ConfigFile {
    /// Parses `[bridge NAME]` (a name of letters, digits, `-`, `_` and `.`).
    static func bridgeSection(_ line: String, at location: String) throws(ConfigFileError) -> String {
        let inner = String(line.dropFirst().dropLast()).trimmingSpaces()
        let words = inner.split(separator: " ", omittingEmptySubsequences: true)
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
        guard line.hasSuffix("]"), words.count == 2, words[0] == "bridge", words[1].allSatisfy(allowed.contains)
        else {
            throw ConfigFileError(
                .invalidSection,
                "\(location): expected a section '[bridge NAME]' (letters, digits, '-', '_', '.'), found \"\(line)\""
            )
        }
        return String(words[1])
    }
}
