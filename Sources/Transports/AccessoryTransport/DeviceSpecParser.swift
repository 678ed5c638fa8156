/// Turns the text of a device spec into a ``DeviceSpec``, strictly, with an error message
/// that says which part was wrong. ``DeviceSpec/init(parsing:)`` is its only user.
struct DeviceSpecParser {
    let text: String

    func parse() throws(TransportError) -> DeviceSpec {
        switch self.text {
        case "emulator": return .emulator
        case "stdio": return .stdio
        case "aoa": return .aoa(AndroidAccessorySelector())
        case "": throw self.invalid("the spec is empty")
        default: break
        }
        if self.text.lowercased().hasPrefix("emulator?") {
            let (_, options) = try self.splitQuery(self.text, known: Self.linkKeys, scheme: "emulator")
            var link = LinkOptions()
            for (key, value) in options { try self.parseLinkOption(key, value, into: &link) }
            return DeviceSpec(.emulator, link: link)
        }
        if self.text.lowercased().hasPrefix("aoa?") {
            return try self.parseAndroidAccessory(ids: nil, String(self.text.dropFirst(3)))
        }
        // Link options have no place in these two texts (stdio is fixed, exec's is a command);
        // say where they go instead of "unknown device".
        let lowered = self.text.lowercased()
        if lowered.hasPrefix("stdio?") {
            throw self.invalid(
                "stdio takes no options in the spec; give session= and http= with --session / --http2 or in the config file"
            )
        }
        if lowered.hasPrefix("exec?") && !lowered.hasPrefix("exec?independent") {
            throw self.invalid(
                "exec: takes no options in the spec (only exec?independent:COMMAND); give session= and http= with --session / --http2 or in the config file"
            )
        }
        guard let colon = self.text.firstIndex(of: ":") else {
            if self.text.hasPrefix("/") || self.text.hasPrefix(".") {
                throw self.invalid("a bare path is ambiguous; write serial:\(self.text) or unix:\(self.text)")
            }
            throw self.invalid("unknown device \"\(self.text)\"")
        }
        let scheme = self.text[..<colon].lowercased()
        let rest = String(self.text[self.text.index(after: colon)...])
        switch scheme {
        case "emulator", "stdio":
            throw self.invalid("\"\(scheme)\" takes nothing after it; write just \(scheme)")
        case "unix":
            let (path, options) = try self.splitQuery(rest, known: Self.linkKeys, scheme: "unix")
            guard !path.isEmpty else { throw self.invalid("unix: needs the socket's path, e.g. unix:/run/acc.sock") }
            try self.rejectNUL(path)
            var link = LinkOptions()
            for (key, value) in options { try self.parseLinkOption(key, value, into: &link) }
            return DeviceSpec(.unix(path: path), link: link)
        case "exec", "exec?independent":
            guard rest.contains(where: { !$0.isWhitespace }) else {
                throw self.invalid("exec: needs a command, e.g. exec:socat - /dev/ttyACM0")
            }
            try self.rejectNUL(rest)
            return .exec(command: rest, independentStreams: scheme == "exec?independent")
        case "serial":
            return try self.parseSerial(rest)
        case "usb":
            return try self.parseUSB(rest)
        case "aoa":
            let (ids, options) =
                rest.firstIndex(of: "?").map { (String(rest[..<$0]), String(rest[$0...])) } ?? (rest, "")
            return try self.parseAndroidAccessory(ids: ids, options)
        default:
            throw self.invalid("unknown scheme \"\(self.text[..<colon])\"")
        }
    }

    // MARK: serial

    private func parseSerial(_ rest: String) throws(TransportError) -> DeviceSpec {
        let (path, options) = try self.splitQuery(
            rest,
            known: ["baud", "data", "parity", "stop", "flow"] + Self.linkKeys,
            scheme: "serial"
        )
        guard !path.isEmpty else { throw self.invalid("serial: needs the tty's path, e.g. serial:/dev/ttyACM0") }
        try self.rejectNUL(path)
        var settings = SerialSettings()
        var link = LinkOptions()
        for (key, value) in options {
            switch key {
            case "session", "http":
                try self.parseLinkOption(key, value, into: &link)
            case "baud":
                guard let baud = Self.decimal(value), baud > 0 else {
                    throw self.invalid("baud=\(value) is not a positive whole number of bits per second")
                }
                settings.baudRate = baud
            case "data":
                guard let bits = Self.decimal(value).flatMap(SerialSettings.DataBits.init(rawValue:)) else {
                    throw self.invalid("data=\(value) must be 5, 6, 7 or 8")
                }
                settings.dataBits = bits
            case "parity":
                guard let parity = SerialSettings.Parity(rawValue: value) else {
                    throw self.invalid("parity=\(value) must be none, even or odd")
                }
                settings.parity = parity
            case "stop":
                guard let stop = Self.decimal(value).flatMap(SerialSettings.StopBits.init(rawValue:)) else {
                    throw self.invalid("stop=\(value) must be 1 or 2")
                }
                settings.stopBits = stop
            default:  // "flow": splitQuery admits known keys only
                guard let flow = SerialSettings.FlowControl(rawValue: value) else {
                    throw self.invalid("flow=\(value) must be none or rtscts")
                }
                settings.flowControl = flow
            }
        }
        return DeviceSpec(.serial(path: path, settings: settings), link: link)
    }

    // MARK: usb

    private func parseUSB(_ rest: String) throws(TransportError) -> DeviceSpec {
        let (ids, options) = try self.splitQuery(
            rest,
            known: ["serial", "port", "interface"] + Self.linkKeys,
            scheme: "usb"
        )
        let parts = ids.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2 else {
            throw self.invalid("usb: needs VID:PID in hex, e.g. usb:1209:0001")
        }
        let vendorID = try self.hexID(parts[0], name: "vendor ID")
        let productID = try self.hexID(parts[1], name: "product ID")
        var selector = USBDeviceSelector(vendorID: vendorID, productID: productID)
        var link = LinkOptions()
        for (key, value) in options {
            switch key {
            case "session", "http":
                try self.parseLinkOption(key, value, into: &link)
            case "serial":
                selector.serialNumber = value
            case "port":
                guard USBDeviceSelector.isValidPortPath(value) else {
                    throw self.invalid("port=\(value) is not a USB port path such as 1-2.3 (bus-port[.port...])")
                }
                selector.portPath = value
            default:  // "interface"
                guard let number = Self.decimal(value), (0...255).contains(number) else {
                    throw self.invalid("interface=\(value) must be an interface number from 0 to 255")
                }
                selector.interfaceNumber = number
            }
        }
        return DeviceSpec(.usb(selector), link: link)
    }

    // MARK: aoa

    /// `ids` is `VID:PID` (or `nil` for a bare `aoa`), `query` empty or `?key=value&…`.
    private func parseAndroidAccessory(ids: String?, _ query: String) throws(TransportError) -> DeviceSpec {
        var selector = AndroidAccessorySelector()
        if let ids {
            let parts = ids.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2 else {
                throw self.invalid("aoa: takes the phone's VID:PID in hex (e.g. aoa:18d1:4ee7), or nothing (aoa)")
            }
            selector.vendorID = try self.hexID(parts[0], name: "vendor ID")
            selector.productID = try self.hexID(parts[1], name: "product ID")
        }
        let (_, options) = try self.splitQuery(
            query,
            known: AndroidAccessoryIdentity.keys + ["port"] + Self.linkKeys,
            scheme: "aoa"
        )
        var link = LinkOptions()
        for (key, value) in options {
            switch key {
            case "session", "http":
                try self.parseLinkOption(key, value, into: &link)
            case "port":
                guard USBDeviceSelector.isValidPortPath(value) else {
                    throw self.invalid("port=\(value) is not a USB port path such as 1-2.3 (bus-port[.port...])")
                }
                selector.portPath = value
            default:
                // AOA strings go to the phone NUL-terminated, in one control transfer each.
                guard value.utf8.count <= 255 else {
                    throw self.invalid("\(key)= is \(value.utf8.count) bytes long; an accessory string is at most 255")
                }
                _ = selector.identity.set(key, to: value)
            }
        }
        return DeviceSpec(.aoa(selector), link: link)
    }

    private func hexID(_ text: Substring, name: String) throws(TransportError) -> UInt16 {
        guard text.count == 4, text.allSatisfy(\.isHexDigit), let value = UInt16(text, radix: 16) else {
            throw self.invalid("the \(name) \"\(text)\" must be exactly 4 hex digits, e.g. 1209")
        }
        return value
    }

    // MARK: link options

    static let linkKeys = ["session", "http"]

    private func parseLinkOption(_ key: String, _ value: String, into link: inout LinkOptions) throws(TransportError) {
        if key == "session" {
            guard let session = LinkOptions.Session(rawValue: value) else {
                throw self.invalid("session=\(value) must be off, on or auto")
            }
            link.session = session
        } else {
            guard let version = LinkOptions.HTTPVersion(rawValue: value) else {
                throw self.invalid("http=\(value) must be 1.1 or 2")
            }
            link.http = version
        }
    }

    // MARK: shared

    /// Splits `PATH?key=value&key=value` at the first `?`. Keys must be known and unique,
    /// values non-empty.
    private func splitQuery(
        _ rest: String,
        known: [String],
        scheme: String
    ) throws(TransportError) -> (String, [(key: String, value: String)]) {
        guard let mark = rest.firstIndex(of: "?") else { return (rest, []) }
        let head = String(rest[..<mark])
        let query = rest[rest.index(after: mark)...]
        guard !query.isEmpty else { throw self.invalid("nothing follows \"?\"; remove it or add options") }
        var options: [(key: String, value: String)] = []
        for pair in query.split(separator: "&", omittingEmptySubsequences: false) {
            guard let equals = pair.firstIndex(of: "=") else {
                throw self.invalid("option \"\(pair)\" must be written key=value")
            }
            let key = String(pair[..<equals])
            let value = String(pair[pair.index(after: equals)...])
            guard known.contains(key) else {
                throw self.invalid("unknown option \"\(key)\" for \(scheme): (known: \(known.joined(separator: ", ")))")
            }
            guard !value.isEmpty else { throw self.invalid("option \"\(key)\" has an empty value") }
            guard !options.contains(where: { $0.key == key }) else {
                throw self.invalid("option \"\(key)\" is given more than once")
            }
            try self.rejectNUL(value)
            options.append((key, value))
        }
        return (head, options)
    }

    /// Digits only: `Int(_:)` alone would also take "+8" and "-1".
    private static func decimal(_ text: String) -> Int? {
        guard text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(text)
    }

    private func rejectNUL(_ text: String) throws(TransportError) {
        if text.utf8.contains(0) { throw self.invalid("it contains a NUL character") }
    }

    private func invalid(_ reason: String) -> TransportError {
        TransportError(
            .invalidDeviceSpec,
            "invalid device spec \"\(self.text)\": \(reason).\n\n\(DeviceSpec.acceptedForms)"
        )
    }
}
