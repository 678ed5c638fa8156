import AccessoryBridge
import AccessoryClient
import AccessoryDevices
import Dispatch
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// `accessory-http bridge` with the accessories of the config file's `[bridge NAME]` sections:
/// one bridge per section in this process, and SIGHUP reloads the file.
extension Bridge {
    /// Serves every section until SIGTERM or SIGINT (cancellation). On SIGHUP the file is read
    /// again: sections that are gone or changed stop (their exchanges under way finish within
    /// the grace period), new and changed ones start, unchanged ones are not touched. A file
    /// that no longer parses changes nothing; the error is logged.
    func serveSections(_ config: ConfigFile) async throws {
        let logger = Logger(label: "accessory-http.bridge")
        let supervisor = BridgeSupervisor(command: self, logger: logger)
        // Before the listeners exist: a SIGHUP sent once clients can connect must find the
        // handler (the default action would end the process); one that comes during the start
        // waits in the stream.
        let reloads = SignalStream(SIGHUP)
        defer { reloads.stop() }
        // The first start is all or nothing: a section that cannot start fails the command.
        do {
            try await supervisor.apply(config, strict: true)
        } catch {
            await supervisor.stopAll()
            throw error
        }
        for await _ in reloads.signals {
            logger.info("SIGHUP: reloading \(config.path)")
            do {
                let reloaded = try ConfigFile.load(path: config.path)
                guard !reloaded.bridges.isEmpty else {
                    logger.error(
                        "reload: \(config.path) has no [bridge NAME] section any more; keeping the accessories that run"
                    )
                    continue
                }
                try await supervisor.apply(reloaded, strict: false)
            } catch {
                logger.error("reload: \(error); keeping the accessories that run")
            }
        }
        await supervisor.stopAll()
    }

    /// A bridge's settings for `section`: its own values, else this command's options.
    func bridgeConfiguration(for section: BridgeSection) throws(CLIError) -> AccessoryBridge.Configuration {
        let access = try SocketAccess(
            mode: section.socketMode ?? self.socketMode,
            group: section.socketGroup ?? self.socketGroup
        )
        var configuration = AccessoryBridge.Configuration()
        configuration.name = section.name
        configuration.device = section.device ?? ""
        configuration.queueTimeout = .milliseconds(Int64((section.queueTimeout ?? self.queueTimeout) * 1000))
        configuration.responseTimeout = .milliseconds(Int64((section.responseTimeout ?? self.responseTimeout) * 1000))
        configuration.gracePeriod = .milliseconds(Int64((section.grace ?? self.grace) * 1000))
        configuration.idleRelease = (section.idleRelease ?? self.idleRelease).map { .milliseconds(Int64($0 * 1000)) }
        configuration.clientIdleTimeout = .milliseconds(
            Int64((section.clientIdleTimeout ?? self.clientIdleTimeout) * 1000)
        )
        configuration.allowRemote = section.allowRemote || self.allowRemote
        configuration.socketMode = access.mode
        configuration.socketGroup = access.group
        // Checked when parsed (the section's value) or by validate() (the option's).
        configuration.dnsSD.mode = DNSSDConfiguration.Mode(rawValue: section.dnsSD ?? self.dnsSD) ?? .auto
        configuration.dnsSD.instanceName = section.dnsSDName ?? self.dnsSDName
        return configuration
    }
}

/// The bridges of one process, one per `[bridge NAME]` section, changed as the file changes.
/// Used from one task only (the command's), so it needs no lock.
final class BridgeSupervisor {
    private struct Running {
        let section: BridgeSection
        let bridge: AccessoryBridge
        let clients: [AccessoryClient]
        let ownership: DeviceOwnership?
        let task: Task<Void, Never>
    }

    private let command: Bridge
    private let logger: Logger
    private var running: [String: Running] = [:]

    init(command: Bridge, logger: Logger) {
        self.command = command
        self.logger = logger
    }

    /// Makes the running bridges those of `config`. With `strict`, the first section that
    /// cannot start throws; otherwise it is logged and the others go on.
    func apply(_ config: ConfigFile, strict: Bool) async throws(CLIError) {
        let wanted = Dictionary(config.bridges.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        for (name, bridge) in self.running where wanted[name] != bridge.section {
            self.logger.info("[\(name)] \(wanted[name] == nil ? "removed" : "changed"): stopping")
            await self.stop(name)
        }
        for section in config.bridges where self.running[section.name] == nil {
            do {
                try await self.start(section, config: config)
            } catch {
                if strict { throw error }
                self.logger.error("[\(section.name)] not started: \(error)")
            }
        }
    }

    func stopAll() async {
        for name in self.running.keys.sorted() { await self.stop(name) }
    }

    /// A section's own TLS options (`tls`, `tls-name`, `cacert`, … in the config file), parsed
    /// as the command line's; `nil` when the section sets none, so the command line's apply.
    static func tlsOptions(of section: BridgeSection) throws(CLIError) -> TLSOptions? {
        let context = "\(section.location): [bridge \(section.name)]"
        switch section.tls {
        case nil where section.tlsArguments.isEmpty: return nil
        case false?:
            guard section.tlsArguments.isEmpty else {
                throw CLIError(.usage, "\(context): 'tls = no' with TLS settings; remove one or the other")
            }
            // No TLS, whatever the command line says (parsed: an unparsed TLSOptions() has no values).
            do {
                return try TLSOptions.parse([])
            } catch {
                throw CLIError(.failure, "\(context): \(TLSOptions.message(for: error))")
            }
        default:
            do {
                return try TLSOptions.parse((section.tls == true ? ["--tls"] : []) + section.tlsArguments)
            } catch {
                throw CLIError(.usage, "\(context): \(TLSOptions.message(for: error))")
            }
        }
    }

    private func start(_ section: BridgeSection, config: ConfigFile) async throws(CLIError) {
        let globals = self.command.globals
        let spec = try globals.parseSpec(section.device ?? "", from: section.location, config: config)
        var listeners: [BridgeListener] = []
        for text in section.listen {
            do {
                listeners.append(try BridgeListener(parsing: text))
            } catch {
                throw CLIError(.usage, "\(section.location): [bridge \(section.name)]: \(error.message)")
            }
        }
        let configuration = try self.command.bridgeConfiguration(for: section)
        // The emulator lives in this process: there is no device to share.
        let ownership: DeviceOwnership?
        do {
            ownership = spec.kind == .emulator ? nil : try DeviceOwnership(device: spec.description)
        } catch {
            throw CLIError(.transport, "[bridge \(section.name)]: \(error.message)")
        }
        let clients: [AccessoryClient]
        do {
            clients = try self.command.makeClients(
                for: spec,
                config: config,
                host: section.host ?? globals.host ?? config.host,
                tls: try Self.tlsOptions(of: section)
            )
        } catch {
            ownership?.release()
            // A setting the section got wrong (its TLS options, say) is named with the section.
            let context = "\(section.location): [bridge \(section.name)]: "
            throw error.status == .usage && !error.message.hasPrefix(context)
                ? CLIError(.usage, context + error.message) : error
        }
        // Each line a section's bridge logs names its accessory.
        var logger = Logger(label: "accessory-http.bridge")
        logger[metadataKey: "accessory"] = "\(section.name)"
        let bridge = AccessoryBridge(clients: clients, configuration: configuration, logger: logger)
        let bound: [BridgeListener]
        do {
            bound = try await bridge.bind(listeners)
        } catch {
            for client in clients { await client.shutdown() }
            ownership?.release()
            throw CLIError(
                error.code == .alreadyOwned || error.code == .dnsSDUnavailable ? .transport : .failure,
                "[bridge \(section.name)]: \(error.message)"
            )
        }
        for listener in bound {
            if !listener.isLocal {
                StandardError.write(
                    "accessory-http bridge: WARNING: [\(section.name)] \(listener) accepts connections from other machines; anyone who reaches it can use the accessory\n"
                )
            }
            StandardError.write("accessory-http bridge: [\(section.name)] serving \(spec) on \(listener)\n")
        }
        let task = Task { await bridge.run() }
        self.running[section.name] = Running(
            section: section,
            bridge: bridge,
            clients: clients,
            ownership: ownership,
            task: task
        )
    }

    private func stop(_ name: String) async {
        guard let running = self.running.removeValue(forKey: name) else { return }
        await running.bridge.shutdown()
        await running.task.value
        for client in running.clients { await client.shutdown() }
        running.ownership?.release()
        self.logger.info("[\(name)] stopped")
    }
}

/// A signal delivered as an async sequence (its default action off while the stream lives).
/// Iteration ends when the iterating task is cancelled. The source is live when `init` returns
/// (see ``waitForDispatchSignalHandler(_:)``).
final class SignalStream {
    let signals: AsyncStream<Void>
    private let source: any DispatchSourceSignal

    init(_ number: Int32) {
        // The default action must be off before the source exists (see SignalWatcher).
        signal(number, SIG_IGN)
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler { continuation.yield() }
        source.resume()
        waitForDispatchSignalHandler(number)
        self.signals = stream
        self.source = source
    }

    func stop() { self.source.cancel() }
}
