import AccessoryBridge
import AccessoryClient
import AccessoryDevices
import AccessoryTransport
import ArgumentParser
import Logging

#if canImport(Glibc)
    import Glibc
#endif

struct Bridge: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Own an accessory and serve it as local HTTP/1.1 to every program on this machine.",
        discussion: """
            One process owns the accessory's link; curl, Python, a browser or URLSession reach it \
            through the listeners, one exchange at a time on an HTTP/1.1 link (queued in order).
              accessory-http bridge --device usb:1209:0001 --listen unix:/run/accessory-http/accessory.sock
              curl --unix-socket /run/accessory-http/accessory.sock http://accessory/status
              accessory-http bridge --device emulator --listen tcp:127.0.0.1:8080
            GET /.well-known/accessory-http/status on any listener returns the bridge's counts as JSON.
            The accessory unreachable: 502; busy longer than --queue-timeout: 503 with Retry-After; \
            no answer begun within --response-timeout: 504. One line per request is logged on \
            standard error. SIGTERM or SIGINT: stop accepting, let exchanges under way finish \
            (up to --grace seconds), exit 0.
            Without --listen, the accessories are the config file's [bridge NAME] sections (device, \
            listen, host, and these options' names as keys), one bridge each in this process; \
            SIGHUP reads the file again and starts, stops or restarts only the sections that \
            changed. TCP listeners that other machines can reach are advertised with DNS-SD \
            (_http._tcp) when avahi-publish is installed (--dns-sd). See docs/bridge.md.
            """
    )

    @OptionGroup var globals: GlobalOptions

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Where clients connect: unix:PATH, tcp:127.0.0.1:PORT, tcp:[::1]:PORT, or systemd (the sockets of socket activation); repeatable. Default: systemd when sockets were passed.",
            valueName: "listener"
        )
    )
    var listen: [String] = []

    @Flag(
        name: .long,
        help: "Allow TCP listeners on addresses other than loopback (anyone who reaches them can use the accessory)."
    )
    var allowRemote = false

    @Option(
        name: .long,
        help: ArgumentHelp("Seconds a request may wait for the link before it is answered 503.", valueName: "seconds")
    )
    var queueTimeout: Double = 30

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Seconds the accessory may take to begin an answer before it is answered 504.",
            valueName: "seconds"
        )
    )
    var responseTimeout: Double = 60

    @Option(
        name: .long,
        help: ArgumentHelp("Seconds exchanges under way may take to finish on SIGTERM.", valueName: "seconds")
    )
    var grace: Double = 10

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Release the device (close the serial port, release the USB interfaces) after this many seconds without a request, so another program can use it; the next request takes it again.",
            valueName: "seconds"
        )
    )
    var idleRelease: Double?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Seconds a client connection may stay silent, or leave a request head unfinished, before it is answered 408 and closed.",
            valueName: "seconds"
        )
    )
    var clientIdleTimeout: Double = 60

    @Option(
        name: .long,
        help: ArgumentHelp("unix: listeners: the socket file's mode, in octal (default 0660).", valueName: "mode")
    )
    var socketMode: String?

    @Option(
        name: .long,
        help: ArgumentHelp("unix: listeners: the socket file's group (a name or a gid).", valueName: "group")
    )
    var socketGroup: String?

    @Option(
        name: .customLong("dns-sd"),
        help: ArgumentHelp(
            "Advertise TCP listeners that other machines can reach as _http._tcp with DNS-SD through avahi-publish: auto (when it is installed), on (fail without it) or off.",
            valueName: "auto|on|off"
        )
    )
    var dnsSD: String = "auto"

    @Option(
        name: .customLong("dns-sd-name"),
        help: ArgumentHelp(
            "The advertised instance name (default: the accessory's model and serial number from its /status, else the bridge's name).",
            valueName: "name"
        )
    )
    var dnsSDName: String?

    func validate() throws {
        for listener in self.listen where listener != "systemd" {
            do { _ = try BridgeListener(parsing: listener) } catch { throw ValidationError(error.message) }
        }
        for (name, value) in [
            ("--queue-timeout", self.queueTimeout), ("--response-timeout", self.responseTimeout),
            ("--grace", self.grace), ("--idle-release", self.idleRelease ?? 1),
            ("--client-idle-timeout", self.clientIdleTimeout),
        ]
        where !(value > 0 && value <= 86_400) {
            throw ValidationError("\(name) \(value) is not a number of seconds from 0 to 86400")
        }
        if DNSSDConfiguration.Mode(rawValue: self.dnsSD) == nil {
            throw ValidationError("--dns-sd \(self.dnsSD) is not auto, on or off")
        }
        if let socketMode { _ = try SocketAccess.parseMode(socketMode) }
        if let socketGroup { _ = try SocketAccess.parseGroup(socketGroup) }
    }

    func run() async throws {
        let verbose = self.globals.verbose
        LoggingSystem.bootstrap { label in
            ServiceLogHandler(label: label, level: verbose ? .debug : .info)
        }
        let options = self
        try await runReportingErrors {
            try await options.serve()
        }
    }

    private func serve() async throws {
        Self.raiseDescriptorLimit()
        if self.listen.isEmpty && getenv("LISTEN_FDS") == nil {
            // No listener on the command line: the accessories are the config file's sections.
            guard let config = try self.globals.loadConfig(), !config.bridges.isEmpty else {
                throw CLIError(
                    .usage,
                    "give at least one listener: --listen unix:PATH or --listen tcp:127.0.0.1:PORT, or write [bridge NAME] sections in the config file (docs/bridge.md)"
                )
            }
            guard self.globals.device == nil else {
                throw CLIError(
                    .usage,
                    "--device needs --listen; without it the accessories are those of \(config.path)'s [bridge NAME] sections"
                )
            }
            try await self.serveSections(config)
            return
        }
        let listeners = try self.parsedListeners()
        let (spec, config) = try self.globals.resolveDevice()
        // The emulator lives in this process: there is no device to share.
        let ownership = spec.kind == .emulator ? nil : try Self.takeOwnership(of: spec.description)
        let clients = try self.makeClients(for: spec, config: config, host: self.globals.host ?? config?.host)
        let bridge = AccessoryBridge(
            clients: clients,
            configuration: try self.bridgeConfiguration(device: spec.description)
        )
        // SIGHUP must not end a bridge whose unit reloads it (the default action would): with
        // the accessory given on the command line there is nothing to read again. Handled
        // before the listeners exist, so that no client-visible moment lacks the handler.
        let reloads = SignalStream(SIGHUP)
        let signals = reloads.signals
        let ignored = Task {
            for await _ in signals {
                Logger(label: "accessory-http.bridge").info(
                    "SIGHUP: nothing to reload (the accessory was given on the command line)"
                )
            }
        }
        defer {
            ignored.cancel()
            reloads.stop()
        }
        let bound = try await Self.bind(bridge, listeners, clients: clients)
        for listener in bound {
            if !listener.isLocal {
                StandardError.write(
                    "accessory-http bridge: WARNING: \(listener) accepts connections from other machines; anyone who reaches it can use the accessory\n"
                )
            }
            StandardError.write("accessory-http bridge: serving \(spec) on \(listener)\n")
        }
        if clients.count > 1 {
            StandardError.write(
                "accessory-http bridge: \(clients.count) links, one on each of the device's interfaces\n"
            )
        }
        // SIGTERM and SIGINT end the work through cancellation (runReportingErrors): stop
        // accepting, let exchanges under way finish, then return.
        await withTaskCancellationHandler {
            await bridge.run()
        } onCancel: {
            Task { await bridge.shutdown() }
        }
        for client in clients { await client.shutdown() }
        ownership?.release()
    }

    /// The clients of a bridge to `spec`: one per link the device can carry at once (one per
    /// qualifying USB interface; else one).
    func makeClients(
        for spec: DeviceSpec,
        config: ConfigFile?,
        host: String?,
        tls: TLSOptions? = nil
    ) throws(CLIError) -> [AccessoryClient] {
        let count = DeviceResolver(usbQuirks: config?.usbQuirks ?? [:]).concurrentLinks(for: spec)
        var clients: [AccessoryClient] = []
        for _ in 0..<count {
            let (client, _) = try self.globals.makeClient(
                for: spec,
                config: config,
                host: host,
                redirects: .none,
                tls: tls
            )
            clients.append(client)
        }
        return clients
    }

    private func parsedListeners() throws(CLIError) -> [BridgeListener] {
        var listeners: [BridgeListener] = []
        let passed = SystemdSockets.take()
        if self.listen.isEmpty || self.listen.contains("systemd") {
            guard !passed.isEmpty else {
                throw CLIError(
                    .usage,
                    "--listen systemd: no sockets were passed to this process (LISTEN_FDS); start it from a .socket unit or with systemd-socket-activate -l PATH"
                )
            }
            listeners += passed
        }
        for text in self.listen where text != "systemd" {
            do {
                listeners.append(try BridgeListener(parsing: text))
            } catch {
                throw CLIError(.usage, error.message)
            }
        }
        return listeners
    }

    private static func takeOwnership(of device: String) throws(CLIError) -> DeviceOwnership {
        do {
            return try DeviceOwnership(device: device)
        } catch {
            throw CLIError(.transport, error.message)
        }
    }

    /// The single accessory's settings: a section that gives nothing of its own, so that
    /// every value is this command's option.
    private func bridgeConfiguration(device: String) throws(CLIError) -> AccessoryBridge.Configuration {
        try self.bridgeConfiguration(
            for: BridgeSection(
                name: AccessoryBridge.Configuration().name,
                device: device,
                location: "the command line"
            )
        )
    }

    private static func bind(
        _ bridge: AccessoryBridge,
        _ listeners: [BridgeListener],
        clients: [AccessoryClient]
    ) async throws -> [BridgeListener] {
        do {
            return try await bridge.bind(listeners)
        } catch {
            for client in clients { await client.shutdown() }
            let unavailable = error.code == .alreadyOwned || error.code == .dnsSDUnavailable
            throw CLIError(unavailable ? .transport : .failure, error.message)
        }
    }

    /// A client connection is a descriptor: lift the soft limit (1024 by default) to the hard
    /// one, as servers do, so the bridge does not run out at a thousand clients.
    private static func raiseDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = min(limit.rlim_max, 1 << 20)
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}
