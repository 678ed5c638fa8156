import AccessoryTransport
import AccessoryUSB

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The user's settings file, `$XDG_CONFIG_HOME/accessory-http/config` (by default, and when
/// `XDG_CONFIG_HOME` is unset, empty or relative, `~/.config/accessory-http/config`):
/// `key = value` lines, `#` comments.
///
/// Known keys: `device` (a device spec), `host` (the Host header), `timeout` (seconds).
/// An unknown key is an error that names the file and line, so a typo is never ignored.
/// `[usb VID:PID]` starts a section of USB quirks for that device (see ConfigFile+USB.swift);
/// `[bridge NAME]` one accessory for `accessory-http bridge` (see ConfigFile+Bridge.swift).
public struct ConfigFile: Sendable {
    /// `device = SPEC`: the device when neither the command line nor the environment names one.
    public var device: String?
    /// `host = NAME`: the Host header.
    public var host: String?
    /// `timeout = SECONDS`: a request's deadline.
    public var timeout: Double?
    /// `session = off|on|auto`: the link-session option for a spec that gives none.
    public var session: LinkOptions.Session?
    /// `http = 1.1|2`: the HTTP version for a spec that gives none.
    public var http: LinkOptions.HTTPVersion?
    /// `[usb VID:PID]` sections, keyed by the normalised `vvvv:pppp` (ConfigFile+USB.swift).
    public var usbQuirks: [String: USBQuirks] = [:]
    /// `[bridge NAME]` sections, in file order (ConfigFile+Bridge.swift).
    public var bridges: [BridgeSection] = []
    /// The file's path, as given: the prefix of every error message.
    public var path: String

    /// An empty configuration for the file at `path`.
    public init(path: String) {
        self.path = path
    }

    /// Where the file is when the command line names none; nil when neither `XDG_CONFIG_HOME`
    /// nor `HOME` is an absolute path.
    public static var defaultPath: String? {
        func variable(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
        // The XDG Base Directory spec: a relative XDG_CONFIG_HOME is invalid and must be ignored
        // (else a settings file in whatever directory the command runs in could pick the device,
        // an `exec:` one included).
        if let xdg = variable("XDG_CONFIG_HOME"), xdg.hasPrefix("/") { return xdg + "/accessory-http/config" }
        guard let home = variable("HOME"), home.hasPrefix("/") else { return nil }
        return home + "/.config/accessory-http/config"
    }

    /// The longest timeout the file and the CLI take, in seconds: a year. A `Duration` made from
    /// `inf` or 1e300 seconds traps, so every timeout is bounded above as well as below.
    public static let maximumTimeout: Double = 31_536_000

    /// Whether `seconds` is a timeout the file and the CLI take: above 0, at most a year.
    public static func isTimeout(_ seconds: Double) -> Bool {
        seconds > 0 && seconds <= Self.maximumTimeout
    }

    /// Loads the file at `path`; a missing file is an empty configuration.
    public static func load(path: String) throws(ConfigFileError) -> ConfigFile {
        guard let text = readTextFile(path) else { return ConfigFile(path: path) }
        return try Self.parse(text, path: path)
    }

    /// Parses a settings file's text; `path` names it in error messages.
    public static func parse(_ text: String, path: String) throws(ConfigFileError) -> ConfigFile {
        var config = ConfigFile(path: path)
        var section: String?
        var inBridge = false
        // A byte-order mark, as some editors write, is not part of the first key.
        let text = text.hasPrefix("\u{FEFF}") ? String(text.dropFirst()) : text
        for (index, rawLine) in Self.lines(of: text).enumerated() {
            let line = rawLine.trimmingSpaces()
            let location = "\(path):\(index + 1)"
            if line.isEmpty || line.hasPrefix("#") { continue }
            if let control = line.unicodeScalars.first(where: Self.isControl) {
                let hex = String(control.value, radix: 16, uppercase: true)
                let code = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
                throw ConfigFileError(
                    .malformedLine,
                    "\(location): a control character (\(code)) in the line; a settings file is plain text, one 'key = value' per line"
                )
            }
            if line.hasPrefix("[bridge") {
                let name = try Self.bridgeSection(line, at: location)
                guard !config.bridges.contains(where: { $0.name == name }) else {
                    throw ConfigFileError(
                        .invalidSection,
                        "\(location): a second [bridge \(name)] section (names must differ)"
                    )
                }
                config.bridges.append(BridgeSection(name: name, location: location))
                (section, inBridge) = (nil, true)
                continue
            }
            if line.hasPrefix("[") {
                section = try Self.usbSection(line, at: location)
                inBridge = false
                if let section, config.usbQuirks[section] == nil { config.usbQuirks[section] = USBQuirks() }
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                throw ConfigFileError(.malformedLine, "\(location): expected 'key = value', found \"\(line)\"")
            }
            let key = String(line[..<equals]).trimmingSpaces()
            let value = String(line[line.index(after: equals)...]).trimmingSpaces()
            if inBridge {
                try config.bridges[config.bridges.count - 1].set(key, value, at: location)
                continue
            }
            if let section {
                try config.setUSBQuirk(key, value, device: section, at: location)
                continue
            }
            switch key {
            case "device": config.device = value
            case "host": config.host = value
            case "timeout":
                guard let seconds = Double(value), Self.isTimeout(seconds) else {
                    throw ConfigFileError(
                        .invalidValue,
                        "\(location): timeout must be a number of seconds above 0 and at most \(Int(Self.maximumTimeout)), not \"\(value)\""
                    )
                }
                config.timeout = seconds
            case "session":
                guard let session = LinkOptions.Session(rawValue: value) else {
                    throw ConfigFileError(
                        .invalidValue,
                        "\(location): session must be off, on or auto, not \"\(value)\""
                    )
                }
                config.session = session
            case "http":
                guard let http = LinkOptions.HTTPVersion(rawValue: value) else {
                    throw ConfigFileError(.invalidValue, "\(location): http must be 1.1 or 2, not \"\(value)\"")
                }
                config.http = http
            default:
                throw ConfigFileError(
                    .unknownSetting,
                    "\(location): unknown setting \"\(key)\" (known: device, host, timeout, session, http)"
                )
            }
        }
        for bridge in config.bridges { try bridge.validate() }
        return config
    }

    /// Control characters other than tab, and the line breaks a String knows besides LF and
    /// CRLF (a lone CR, NEL, U+2028, U+2029): never meant inside a line, and not shown by
    /// most editors, so an error rather than part of a value.
    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        (scalar.value < 0x20 && scalar != "\t") || scalar.value == 0x7F || scalar.value == 0x85
            || scalar.value == 0x2028 || scalar.value == 0x2029
    }

    /// The file's lines, ended by LF or CRLF. A String's Characters are grapheme clusters, and
    /// CRLF is one of them, not an LF: splitting on "\n" alone read a whole CRLF file as one
    /// line, its first key taking everything after it as its value.
    public static func lines(of text: String) -> [Substring] {
        text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
    }

    private static func readTextFile(_ path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count <= 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
            if bytes.count > 1 << 20 { break }  // a settings file is small; never read without bound
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension StringProtocol {
    func trimmingSpaces() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        guard let first = self.firstIndex(where: { !isSpace($0) }),
            let last = self.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(self[first...last])
    }
}
