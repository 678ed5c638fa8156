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
struct ConfigFile {
    var device: String?
    var host: String?
    var timeout: Double?
    /// `session = off|on|auto`, `http = 1.1|2`: the link options for a spec that gives none.
    var session: LinkOptions.Session?
    var http: LinkOptions.HTTPVersion?
    var usbQuirks: [String: USBQuirks] = [:]
    /// `[bridge NAME]` sections, in file order (ConfigFile+Bridge.swift).
    var bridges: [BridgeSection] = []
    var path: String

    static var defaultPath: String? {
        let environment = Environment()
        // The XDG Base Directory spec: a relative XDG_CONFIG_HOME is invalid and must be ignored
        // (else a settings file in whatever directory the command runs in could pick the device,
        // an `exec:` one included).
        if let xdg = environment["XDG_CONFIG_HOME"], xdg.hasPrefix("/") { return xdg + "/accessory-http/config" }
        guard let home = environment["HOME"], home.hasPrefix("/") else { return nil }
        return home + "/.config/accessory-http/config"
    }

    /// Loads the file at `path`; a missing file is an empty configuration.
    static func load(path: String) throws(CLIError) -> ConfigFile {
        var config = ConfigFile(path: path)
        guard let text = readTextFile(path) else { return config }
        var section: String?
        var inBridge = false
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.trimmingSpaces()
            let location = "\(path):\(index + 1)"
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[bridge") {
                let name = try Self.bridgeSection(line, at: location)
                guard !config.bridges.contains(where: { $0.name == name }) else {
                    throw CLIError(.usage, "\(location): a second [bridge \(name)] section (names must differ)")
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
                throw CLIError(.usage, "\(location): expected 'key = value', found \"\(line)\"")
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
                guard let seconds = Double(value), seconds > 0 else {
                    throw CLIError(
                        .usage,
                        "\(path):\(index + 1): timeout must be a positive number of seconds, not \"\(value)\""
                    )
                }
                config.timeout = seconds
            case "session":
                guard let session = LinkOptions.Session(rawValue: value) else {
                    throw CLIError(.usage, "\(path):\(index + 1): session must be off, on or auto, not \"\(value)\"")
                }
                config.session = session
            case "http":
                guard let http = LinkOptions.HTTPVersion(rawValue: value) else {
                    throw CLIError(.usage, "\(path):\(index + 1): http must be 1.1 or 2, not \"\(value)\"")
                }
                config.http = http
            default:
                throw CLIError(
                    .usage,
                    "\(path):\(index + 1): unknown setting \"\(key)\" (known: device, host, timeout, session, http)"
                )
            }
        }
        for bridge in config.bridges { try bridge.validate() }
        return config
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

/// This process's environment variables.
struct Environment {
    subscript(name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        return String(cString: value)
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
