/// Where the accessory is, written as one line of text: the single parser used by the
/// command line, configuration files and the API, so every place accepts the same forms.
///
/// ```swift
/// let spec = try DeviceSpec(parsing: "serial:/dev/ttyACM0?baud=9600&flow=rtscts")
/// let transport = try spec.makeTransport()
/// ```
///
/// ``description`` prints the canonical form, which parses back to an equal value. Paths and
/// query values are taken literally (no percent-decoding), so a serial path containing `?` or
/// a USB serial number containing `&` cannot be written as a spec.
public struct DeviceSpec: Sendable, Hashable, CustomStringConvertible {
    /// Which device, and how to reach it.
    public enum Kind: Sendable, Hashable {
        /// `emulator`: the built-in emulated accessory, supplied by the client layer.
        case emulator
        /// `stdio`: this process's own standard input and output, e.g. under `socat` or `ssh`.
        case stdio
        /// `unix:PATH`: a unix-domain stream socket. A relative path is resolved against the
        /// working directory when the socket is opened.
        case unix(path: String)
        /// `exec:COMMAND`: the standard input and output of a child process run with `/bin/sh -c`.
        /// `exec?independent:COMMAND` says that every run of the command is an independent stream
        /// (it does not reach a line that another run may still be talking on), so an abandoned
        /// response is not drained: that run is ended and the next request starts a new one (see
        /// `ByteStreamTransport.opensIndependentStreams`). Off by default: a command such as
        /// `socat - /dev/ttyACM0` reaches a shared line.
        case exec(command: String, independentStreams: Bool = false)
        /// `serial:PATH[?baud=…&data=…&parity=…&stop=…&flow=…]`: a serial tty.
        case serial(path: String, settings: SerialSettings)
        /// `usb:VID:PID[?serial=…&port=…&interface=…]`: a USB accessory's bulk endpoints.
        /// Opened by `USBTransport` in AccessoryUSB (libusb); ``makeTransport()`` here throws
        /// ``TransportError/Code/unsupported`` because AccessoryTransport does not link libusb.
        case usb(USBDeviceSelector)
        /// `aoa[:VID:PID][?manufacturer=…&model=…&description=…&version=…&uri=…&serial=…&port=…]`:
        /// an Android device switched into accessory mode (Android Open Accessory), then its
        /// accessory interface's bulk pair. Opened by `AndroidAccessoryTransport` in AccessoryUSB.
        case aoa(AndroidAccessorySelector)
    }

    /// Which device.
    public var kind: Kind
    /// What the link speaks on it: `session=` and `http=` (docs/framing.md).
    public var link: LinkOptions

    /// A spec for the device `kind` names.
    ///
    /// - Parameters:
    ///   - kind: Which device, and how to reach it.
    ///   - link: What the link speaks on it; plain HTTP/1.1 without the session layer by default.
    public init(_ kind: Kind, link: LinkOptions = LinkOptions()) {
        self.kind = kind
        self.link = link
    }

    /// `emulator` with default link options.
    public static let emulator = DeviceSpec(.emulator)
    /// `stdio`.
    public static let stdio = DeviceSpec(.stdio)
    /// `unix:PATH` with default link options.
    public static func unix(path: String) -> DeviceSpec { DeviceSpec(.unix(path: path)) }
    /// `exec:COMMAND` (or `exec?independent:COMMAND`).
    public static func exec(command: String, independentStreams: Bool = false) -> DeviceSpec {
        DeviceSpec(.exec(command: command, independentStreams: independentStreams))
    }
    /// `serial:PATH?…` with default link options.
    public static func serial(path: String, settings: SerialSettings) -> DeviceSpec {
        DeviceSpec(.serial(path: path, settings: settings))
    }
    /// `usb:VID:PID?…` with default link options.
    public static func usb(_ selector: USBDeviceSelector) -> DeviceSpec { DeviceSpec(.usb(selector)) }
    /// `aoa…` with default link options.
    public static func aoa(_ selector: AndroidAccessorySelector) -> DeviceSpec { DeviceSpec(.aoa(selector)) }

    /// Parses a device spec.
    ///
    /// Parsing is strict: an unknown scheme or query key, an empty path or command, a
    /// repeated key or a malformed value is an error rather than a guess.
    ///
    /// - Throws: ``TransportError`` with code ``TransportError/Code/invalidDeviceSpec`` and a
    ///   message that says what was wrong and lists ``acceptedForms``.
    public init(parsing text: String) throws(TransportError) {
        self = try DeviceSpecParser(text: text).parse()
    }

    /// Every accepted form with an example, one per line, for help text and error messages.
    public static let acceptedForms: String = """
        Accepted device specs:
          emulator                the built-in emulated accessory
          stdio                   this process's stdin and stdout (e.g. under socat or ssh)
          unix:PATH               a unix stream socket, e.g. unix:/run/acc.sock
          exec:COMMAND            a child process's stdin/stdout, run with /bin/sh -c,
                                  e.g. exec:socat - /dev/ttyACM0,raw,echo=0
          exec?independent:COMMAND  the same, for a command whose every run is its own stream
                                  (an abandoned answer ends the run instead of being drained)
          serial:PATH[?OPTIONS]   a serial tty, e.g. serial:/dev/ttyACM0?baud=115200&flow=rtscts
                                  options (default): baud=N (115200), data=5|6|7|8 (8),
                                  parity=none|even|odd (none), stop=1|2 (1), flow=none|rtscts (none)
          usb:VID:PID[?OPTIONS]   a USB accessory's bulk endpoints (libusb), IDs in 4 hex digits,
                                  e.g. usb:1209:0001?serial=A1B2&port=1-2.3&interface=0
                                  options: serial=SERIAL, port=BUS-PORT[.PORT...], interface=N
          aoa[:VID:PID][?OPTIONS] an Android device switched into accessory mode (Android Open
                                  Accessory); bare aoa takes the first device that answers,
                                  e.g. aoa:18d1:4ee7?manufacturer=Acme&model=Meter&uri=https://acme.example
                                  options: the strings sent to the phone, manufacturer=, model=,
                                  description=, version=, uri=, serial= (the accessory's own
                                  serial number); port=BUS-PORT[.PORT...] chooses the phone
        Link options, on emulator, unix:, serial:, usb: and aoa (e.g. serial:/dev/ttyACM0?session=on):
          session=off|on|auto     the session layer (docs/framing.md): on makes every process
                                  start on a clean line; auto tries it and falls back (off)
          http=1.1|2              the HTTP version on the link (1.1)
        """

    /// The canonical text form; `DeviceSpec(parsing: spec.description) == spec`, except that
    /// `stdio` and `exec:` take no link options in their text (give them with the CLI's
    /// `--session` / `--http2` or the config file), so a spec of those kinds with link options
    /// set prints without them.
    ///
    /// Serial options equal to their defaults are left out.
    public var description: String {
        let link = self.link.queryItems
        switch self.kind {
        case .emulator:
            return "emulator" + Self.query(link)
        case .stdio:
            return "stdio"
        case .unix(let path):
            return "unix:\(path)" + Self.query(link)
        case .exec(let command, let independentStreams):
            return (independentStreams ? "exec?independent:" : "exec:") + command
        case .serial(let path, let settings):
            let defaults = SerialSettings()
            var options: [String] = []
            if settings.baudRate != defaults.baudRate { options.append("baud=\(settings.baudRate)") }
            if settings.dataBits != defaults.dataBits { options.append("data=\(settings.dataBits.rawValue)") }
            if settings.parity != defaults.parity { options.append("parity=\(settings.parity.rawValue)") }
            if settings.stopBits != defaults.stopBits { options.append("stop=\(settings.stopBits.rawValue)") }
            if settings.flowControl != defaults.flowControl { options.append("flow=\(settings.flowControl.rawValue)") }
            return "serial:\(path)" + Self.query(options + link)
        case .usb(let selector):
            var options: [String] = []
            if let serial = selector.serialNumber { options.append("serial=\(serial)") }
            if let port = selector.portPath { options.append("port=\(port)") }
            if let interface = selector.interfaceNumber { options.append("interface=\(interface)") }
            return "usb:\(selector)" + Self.query(options + link)
        case .aoa(let selector):
            let defaults = AndroidAccessoryIdentity()
            var options: [String] = []
            for (key, (value, standard)) in zip(
                AndroidAccessoryIdentity.keys,
                zip(selector.identity.strings, defaults.strings)
            ) where value != standard {
                options.append("\(key)=\(value)")
            }
            if let port = selector.portPath { options.append("port=\(port)") }
            let ids = selector.vendorID.map { _ in ":\(selector)" } ?? ""
            return "aoa" + ids + Self.query(options + link)
        }
    }

    private static func query(_ options: [String]) -> String {
        options.isEmpty ? "" : "?" + options.joined(separator: "&")
    }
}

/// What a link speaks on its device: the `session=` and `http=` options of a device spec, the
/// same keys in the config file, and the link configuration of the API.
public struct LinkOptions: Sendable, Hashable {
    /// `session=`: the session layer under HTTP (docs/framing.md).
    public enum Session: String, Sendable, Hashable, CaseIterable {
        /// Plain HTTP/1.1 on the wire (the default: any HTTP/1.1 device works).
        case off
        /// Every stream starts with HELLO; the device must speak sessions.
        case on
        /// HELLO first; a device that does not answer it in time is spoken to plainly.
        case auto
    }

    /// `http=`: the HTTP version on the link.
    public enum HTTPVersion: String, Sendable, Hashable, CaseIterable {
        /// `http=1.1`: HTTP/1.1, one exchange at a time (the default).
        case http1_1 = "1.1"
        /// `http=2`: HTTP/2 with prior knowledge (RFC 9113), several exchanges at once on one link.
        case http2 = "2"
    }

    /// `session=`: whether the session layer runs under HTTP; ``LinkOptions/Session/off`` unless set.
    public var session: Session
    /// `http=`: the HTTP version on the link; ``LinkOptions/HTTPVersion/http1_1`` unless set.
    public var http: HTTPVersion

    /// Link options; the defaults are what a spec without `session=` and `http=` means.
    ///
    /// - Parameters:
    ///   - session: The session layer under HTTP; ``LinkOptions/Session/off`` by default.
    ///   - http: The HTTP version on the link; ``LinkOptions/HTTPVersion/http1_1`` by default.
    public init(session: Session = .off, http: HTTPVersion = .http1_1) {
        self.session = session
        self.http = http
    }

    /// The options that differ from the defaults, as `key=value` for a spec's query.
    var queryItems: [String] {
        var items: [String] = []
        if self.session != .off { items.append("session=\(self.session.rawValue)") }
        if self.http != .http1_1 { items.append("http=\(self.http.rawValue)") }
        return items
    }
}
