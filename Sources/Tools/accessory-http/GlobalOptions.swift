import AccessoryClient
import AccessoryDevices
import AccessoryEmulator
import AccessoryHTTP1
import AccessoryTransport
import ArgumentParser
import NIOCore
import NIOPosix

/// Options every subcommand takes, before or after its name.
struct GlobalOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The accessory: emulator, unix:PATH, exec:COMMAND, serial:PATH[?baud=N&flow=rtscts], usb:VID:PID[?serial=S], stdio.",
            discussion: "Defaults to $ACCESSORY_HTTP_DEVICE, then `device` in ~/.config/accessory-http/config.",
            valueName: "spec"
        )
    )
    var device: String?

    @Flag(name: .shortAndLong, help: "Trace both directions to stderr: heads, and body bytes as a hex dump.")
    var verbose = false

    @Option(name: .long, help: ArgumentHelp("Most body bytes per message shown by -v.", valueName: "bytes"))
    var traceLimit: Int = 4096

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The Host header to send (default: from the config file, else \"accessory\").",
            valueName: "name"
        )
    )
    var host: String?

    @Option(
        name: .long,
        help: ArgumentHelp("Settings file (default: ~/.config/accessory-http/config).", valueName: "path")
    )
    var config: String?

    @Flag(
        name: .long,
        help: ArgumentHelp(
            "Use the session layer on the link (the same as session=on in the spec; for exec: too).",
            discussion:
                "Every run starts on a clean line, even while the device still sends an answer nobody reads (docs/framing.md)."
        )
    )
    var session = false

    @Flag(name: .long, help: "Use HTTP/2 on the link (the same as http=2 in the spec).")
    var http2 = false

    @OptionGroup(title: "TLS") var tls: TLSOptions

    /// The device spec chosen by `--device`, then `$ACCESSORY_HTTP_DEVICE`, then the config file.
    func resolveDevice() throws(CLIError) -> (DeviceSpec, ConfigFile?) {
        let config = try self.loadConfig()
        let text: String
        let source: String
        if let device = self.device {
            (text, source) = (device, "--device")
        } else if let device = Environment()["ACCESSORY_HTTP_DEVICE"], !device.isEmpty {
            (text, source) = (device, "ACCESSORY_HTTP_DEVICE")
        } else if let device = config?.device {
            (text, source) = (device, config?.path ?? "the config file")
        } else {
            throw CLIError(
                .usage,
                """
                no accessory chosen. Choose one with --device SPEC (try --device emulator), \
                set ACCESSORY_HTTP_DEVICE=SPEC, or write 'device = SPEC' in \(ConfigFile.defaultPath ?? "~/.config/accessory-http/config").
                \(DeviceSpec.acceptedForms)
                """
            )
        }
        return (try self.parseSpec(text, from: source, config: config), config)
    }

    /// Parses a device spec given by `source` (a flag, a variable, a file and line), with the
    /// link options of the config file and of the flags applied.
    func parseSpec(_ text: String, from source: String, config: ConfigFile?) throws(CLIError) -> DeviceSpec {
        var spec: DeviceSpec
        do {
            spec = try DeviceSpec(parsing: text)
        } catch {
            throw CLIError(.usage, "\(source): \(error.message)")
        }
        // The spec's own options win over the config file's; the flags win over both.
        if spec.link.session == .off, let session = config?.session { spec.link.session = session }
        if spec.link.http == .http1_1, let http = config?.http { spec.link.http = http }
        if self.session { spec.link.session = .on }
        if self.http2 { spec.link.http = .http2 }
        return spec
    }

    func loadConfig() throws(CLIError) -> ConfigFile? {
        guard let path = self.config ?? ConfigFile.defaultPath else { return nil }
        do {
            return try ConfigFile.load(path: path)
        } catch {
            throw CLIError(.usage, error.message)
        }
    }

    /// A transport for a client, from the one resolver every spec kind goes through (the
    /// emulator runs in this process on a socketpair; USB devices get their quirks from the
    /// config file).
    static func clientTransport(
        for spec: DeviceSpec,
        config: ConfigFile? = nil,
        verbose: Bool = false
    ) throws(CLIError) -> any ByteStreamTransport {
        var resolver = DeviceResolver(usbQuirks: config?.usbQuirks ?? [:])
        if verbose { resolver.sessionConfiguration.tracer = { StandardError.write("* \($0)\n") } }
        do {
            return try resolver.transport(for: spec)
        } catch {
            throw CLIError(error.code == .unsupported ? .transport : .usage, error.message)
        }
    }

    /// Builds a client for the chosen device with this run's settings, and the `-v` trace
    /// renderer if there is one (flush it when the exchange ends).
    func makeClient(
        redirects: RedirectPolicy = .default,
        connectTimeout: Double? = nil,
        compressed: Bool = false
    ) throws(CLIError) -> (AccessoryClient, ConfigFile?, TraceRenderer?) {
        let (spec, config) = try self.resolveDevice()
        let (client, renderer) = try self.makeClient(
            for: spec,
            config: config,
            host: self.host ?? config?.host,
            redirects: redirects,
            connectTimeout: connectTimeout,
            compressed: compressed
        )
        return (client, config, renderer)
    }

    /// Builds a client for `spec` with this run's settings (`host`, when given, is the Host
    /// header; `tls`, when given, replaces the command line's TLS options), and the `-v` trace
    /// renderer if there is one.
    func makeClient(
        for spec: DeviceSpec,
        config: ConfigFile?,
        host: String?,
        redirects: RedirectPolicy = .default,
        connectTimeout: Double? = nil,
        compressed: Bool = false,
        tls: TLSOptions? = nil
    ) throws(CLIError) -> (AccessoryClient, TraceRenderer?) {
        let transport = try (tls ?? self.tls).wrapClient(
            try Self.clientTransport(for: spec, config: config, verbose: self.verbose),
            spec: spec
        )
        var configuration = AccessoryClient.Configuration()
        if let host { configuration.link.host = host }
        if let seconds = config?.timeout { configuration.defaultTimeout = .seconds(seconds) }
        configuration.redirects = redirects
        if let connectTimeout { configuration.link.openTimeout = .seconds(connectTimeout) }
        configuration.link.decompressResponses = compressed
        configuration.link.httpVersion = spec.link.http
        let renderer = self.verbose ? TraceRenderer(limit: self.traceLimit) : nil
        if let renderer { configuration.link.tracer = renderer.tracer }
        if case .usb(let selector) = spec.kind, config?.usbQuirks[selector.description]?.titleCaseHeaderNames == true {
            configuration.link.titleCaseHeaderNames = true
        }
        return (AccessoryClient(transport: transport, configuration: configuration), renderer)
    }
}
