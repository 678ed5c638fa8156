import AccessoryTransport
import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(Glibc)
    import Glibc
#endif

extension AccessoryBridge {
    /// Binds `listeners` (call before ``run()``: once it runs, or ``shutdown()`` began, this
    /// throws `bind-failed`); returns them as bound (a TCP port 0 resolved).
    ///
    /// If one cannot be bound, those this call bound before it are closed again (their socket
    /// files removed) before this throws: a daemon that goes on without this bridge (a reload
    /// that skips a section) leaves no listener behind that accepts and never answers. Calls
    /// that overlap each undo only their own; listeners a ``run()`` that began meanwhile
    /// already serves stay served, and ``shutdown()`` ends them.
    public func bind(_ listeners: [BridgeListener]) async throws(BridgeError) -> [BridgeListener] {
        try self.checkDNSSD()
        for listener in listeners where !listener.isLocal && !self.configuration.allowRemote {
            throw BridgeError(
                .remoteNotAllowed,
                "--listen \(listener) would let any machine that reaches that address use the accessory; listen on 127.0.0.1 or ::1, or pass --allow-remote if that is what you want"
            )
        }
        if let refusal = self.state.withLock({ Self.bindRefusal($0) }) { throw refusal }
        var mine: [BoundListener] = []
        do {
            return try await self.bindEach(listeners, into: &mine)
        } catch {
            await self.unbind(mine)
            throw error
        }
    }

    /// A listener one ``bind(_:)`` call added to the state, as it was added.
    struct BoundListener: Sendable {
        let server: NIOAsyncChannel<BridgeChannel, Never>
        let path: String?
        let tcp: (host: String, port: Int)?
    }

    /// Why a bind cannot be taken now: listeners are bound before ``run()`` (it serves those it
    /// found), and never after ``shutdown()`` began (nothing would close them).
    private static func bindRefusal(_ state: State) -> BridgeError? {
        if state.isShuttingDown {
            return BridgeError(.bindFailed, "the bridge is shutting down; bind a new one instead")
        }
        if state.running {
            return BridgeError(.bindFailed, "the bridge is already serving; bind every listener before run()")
        }
        return nil
    }

    /// Binds each listener and adds it to the state, recording in `mine` what it added.
    private func bindEach(
        _ listeners: [BridgeListener],
        into mine: inout [BoundListener]
    ) async throws(BridgeError) -> [BridgeListener] {
        var bound: [BridgeListener] = []
        for listener in listeners {
            let server = try await self.bindOne(listener)
            let entry: BoundListener
            switch listener {
            case .unix(let path):
                entry = BoundListener(server: server, path: path, tcp: nil)
                bound.append(listener)
            case .inherited:
                entry = BoundListener(server: server, path: nil, tcp: nil)
                bound.append(listener)
            case .tcp(let host, _):
                let port = server.channel.localAddress?.port ?? 0
                entry = BoundListener(server: server, path: nil, tcp: (host, port))
                bound.append(.tcp(host: host, port: port))
            }
            // Checked again as the listener is kept: a shutdown (or run) may have begun while it bound.
            let refusal = self.state.withLock { state -> BridgeError? in
                if let refusal = Self.bindRefusal(state) { return refusal }
                state.servers.append(server)
                if let path = entry.path { state.socketPaths.append(path) }
                if let tcp = entry.tcp { state.boundTCP.append(tcp) }
                return nil
            }
            if let refusal {
                await Self.close(server, removing: entry.path)
                throw refusal
            }
            mine.append(entry)
        }
        return bound
    }

    /// Takes back what one ``bind(_:)`` call added, unless ``run()`` serves it now or
    /// ``shutdown()`` began (each ends what it took); closes it and removes its socket file.
    private func unbind(_ mine: [BoundListener]) async {
        let taken = self.state.withLock { state -> [BoundListener] in
            guard !state.running, !state.isShuttingDown else { return [] }
            return mine.filter { entry in
                guard let index = state.servers.firstIndex(where: { $0.channel === entry.server.channel }) else {
                    return false
                }
                state.servers.remove(at: index)
                if let path = entry.path, let at = state.socketPaths.firstIndex(of: path) {
                    state.socketPaths.remove(at: at)
                }
                if let tcp = entry.tcp,
                    let at = state.boundTCP.firstIndex(where: { $0.host == tcp.host && $0.port == tcp.port })
                {
                    state.boundTCP.remove(at: at)
                }
                return true
            }
        }
        for entry in taken { await Self.close(entry.server, removing: entry.path) }
    }

    /// Ends a listener nobody serves, through executeThenClose as ``run()`` ends its own (a
    /// NIOAsyncChannel dropped without it traps when it is deinitialized: its writer never
    /// finished), and removes its socket file.
    private static func close(_ server: NIOAsyncChannel<BridgeChannel, Never>, removing path: String?) async {
        try? await server.executeThenClose { _ in }
        if let path { _ = unlink(path) }
    }

    private func bindOne(_ listener: BridgeListener) async throws(BridgeError) -> NIOAsyncChannel<BridgeChannel, Never>
    {
        let bootstrap = ServerBootstrap(group: self.eventLoopGroup)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.allowRemoteHalfClosure, value: true)  // `printf … | nc -N` still gets its answer
        let idleTimeout = TimeAmount.nanoseconds(
            Int64(self.configuration.clientIdleTimeout.components.seconds) * 1_000_000_000
                + self.configuration.clientIdleTimeout.components.attoseconds / 1_000_000_000
        )
        let unclaimed = self.unclaimed
        let initializer: @Sendable (any Channel) -> EventLoopFuture<BridgeChannel> = { channel in
            // NIO neither serves nor closes a connection whose set-up failed (here: one refused
            // by `unclaimed` as the bridge stops): its client would hang.
            channel.eventLoop.makeCompletedFuture {
                var encoder = HTTPResponseEncoder.Configuration()
                encoder.automaticallySetFramingHeaders = false  // forwarded answers keep their own framing
                try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                    withPipeliningAssistance: true,
                    withErrorHandling: false,  // ClientInputGuard answers 400 and 431 itself
                    withEncoderConfiguration: encoder
                )
                let raw = RawWriter()
                try channel.pipeline.syncOperations.addHandler(raw, position: .first)
                try channel.pipeline.syncOperations.addHandler(ClientInputGuard(idleTimeout: idleTimeout, raw: raw))
                return try unclaimed.admit(channel) { try BridgeChannel(wrappingChannelSynchronously: $0) }
            }.flatMapErrorThrowing { error in
                channel.close(promise: nil)
                throw error
            }
        }
        do {
            switch listener {
            case .unix(let path):
                try UnixSocketPath.prepare(path)
                let previous = umask(0o177)  // nobody else may connect until mode and group are set
                defer { umask(previous) }
                let server = try await bootstrap.bind(
                    unixDomainSocketPath: path,
                    cleanupExistingSocketFile: false,
                    childChannelInitializer: initializer
                )
                do {
                    try UnixSocketPath.apply(
                        mode: self.configuration.socketMode,
                        group: self.configuration.socketGroup,
                        to: path
                    )
                } catch {
                    await Self.close(server, removing: path)
                    throw error
                }
                return server
            case .tcp(let host, let port):
                return try await bootstrap.bind(host: host, port: port, childChannelInitializer: initializer)
            case .inherited(let descriptor):
                return try await bootstrap.bind(descriptor, childChannelInitializer: initializer)
            }
        } catch let error as BridgeError {
            throw error
        } catch {
            throw BridgeError(.bindFailed, "cannot listen on \(listener): \(error)", underlying: error)
        }
    }
}
