import AccessorySession
import AccessoryTransport
import Logging
import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Serves HTTP/1.1 on byte stream pairs: the accessory side of a link.
///
/// Each link carries one exchange at a time, in order, kept alive across requests. Request and
/// response bodies stream with back-pressure. Malformed or oversized requests are answered
/// with `400`/`431` and the link is closed, because its bytes can no longer be trusted to be
/// in step.
public struct HTTPResponder: Sendable {
    private let configuration: ResponderConfiguration
    private let handler: HTTPHandler
    private let logger = Logger(label: "accessory-http.responder")
    /// Ends every link this responder serves gracefully when begun: an HTTP/2 connection sends
    /// GOAWAY and closes once its streams are answered (within
    /// ``ResponderConfiguration/shutdownGrace``), and a unix socket listener stops accepting.
    /// Shared by every copy of this responder.
    public let shutdown = ResponderShutdown()

    /// Creates a responder that answers every request with `handler`.
    public init(configuration: ResponderConfiguration = .init(), handler: @escaping HTTPHandler) {
        self.configuration = configuration
        self.handler = handler
    }

    /// Serves one byte stream pair until the peer closes it (or the task is cancelled).
    ///
    /// - Parameters:
    ///   - descriptor: a socket, pipe or tty that carries both directions (a socketpair end, for
    ///     instance). The responder takes ownership and closes it when done, also when it throws.
    ///   - eventLoop: the NIO (`NIOPosix`) event loop that drives the link (by default one of
    ///     NIO's shared singleton loops).
    /// - Throws: ``ResponderError`` (``ResponderError/Code/setupFailed``) if the descriptor
    ///   cannot be served (a regular file, say). Once serving, it returns normally however the
    ///   link ends.
    public func serve(
        descriptor: CInt,
        on eventLoop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next()
    ) async throws {
        // NIO refuses regular files but then leaves the descriptor with us; check first so that
        // every failure after this point is one where NIO owns (and closes) the descriptor.
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw ResponderError(
                .setupFailed,
                "descriptor \(descriptor) is not open: \(String(cString: strerror(errno)))"
            )
        }
        guard (info.st_mode & S_IFMT) != S_IFREG else {
            _ = close(descriptor)
            throw ResponderError(.setupFailed, "descriptor \(descriptor) is a regular file, not a byte stream")
        }
        // NIO traps on a descriptor epoll refuses (/dev/null, /dev/zero).
        guard ReadinessWatch.accepts(descriptor) else {
            _ = close(descriptor)
            throw ResponderError(
                .setupFailed,
                "descriptor \(descriptor) is a device that is always ready (such as /dev/null or /dev/zero), not a byte stream; connect it to a pipe, socket or terminal"
            )
        }
        let configuration = self.configuration
        let isSocket = Self.isStreamSocket(descriptor)
        let initializer: @Sendable (any Channel) -> EventLoopFuture<ServedLink> = { channel in
            channel.eventLoop.makeCompletedFuture {
                try ResponderPipeline.configureLink(
                    channel,
                    configuration: configuration,
                    halfCloses: isSocket,
                    sendQueue: KernelSendQueue(descriptor: descriptor)
                )
            }
        }
        let served: ServedLink
        do {
            if isSocket {
                // A stream socket (a socketpair end, a unix socket) is served as a socket, not as
                // a pipe pair: NIO's pipe channel splits it into two descriptors and, when the
                // peer goes away while a response waits for room, can see the write side's
                // hang-up first and then the read side's end as a half-close, and stays open
                // for ever with the write pending (seen: one serve call in two stuck after a
                // killed download through the bridge). A socket channel takes the hang-up as
                // the end of the whole link.
                served = try await ClientBootstrap(group: eventLoop)
                    .channelOption(.allowRemoteHalfClosure, value: true)
                    .withConnectedSocket(descriptor, channelInitializer: initializer)
            } else {
                // A terminal never half-closes: the end of its input is a hang-up (an unplugged
                // gadget, a closed pty master), and it ends the link. Taken as a half-close, NIO's
                // pipe channel, having already closed the write side on the hang-up, would wait
                // for room to write for ever (every try with a pty whose master closed during a
                // download).
                served = try await NIOPipeBootstrap(group: eventLoop)
                    .channelOption(.allowRemoteHalfClosure, value: isatty(descriptor) == 0)
                    .takingOwnershipOfDescriptor(inputOutput: descriptor, channelInitializer: initializer)
            }
        } catch {
            throw ResponderError(.setupFailed, "could not serve descriptor \(descriptor): \(error)")
        }
        await self.serve(served)
    }

    /// Whether `descriptor` is a connected stream socket (`SOCK_STREAM`).
    private static func isStreamSocket(_ descriptor: CInt) -> Bool {
        var type: CInt = 0
        var length = socklen_t(MemoryLayout<CInt>.size)
        return getsockopt(descriptor, SOL_SOCKET, SO_TYPE, &type, &length) == 0 && type == CInt(SOCK_STREAM.rawValue)
    }

    /// Opens `transport` once and serves that link until the peer closes it (or the task is
    /// cancelled).
    ///
    /// - Throws: ``ResponderError`` (``ResponderError/Code/setupFailed``) if the transport cannot
    ///   be opened; the transport's own error is part of the message.
    /// - Parameters:
    ///   - transport: the byte stream pair to serve; opened once, on `eventLoop`.
    ///   - eventLoop: drives the link; by default one of NIO's shared singleton loops.
    ///   - streamLayer: handlers every stream gets between the session layer and HTTP, fresh for
    ///     each: TLS over a byte stream goes here (`TLSServerContext.addHandler(to:)`), so that
    ///     every session the host opens is a TLS connection of its own (docs/framing.md §8). A
    ///     host without sessions gets one, for the one stream.
    public func serve(
        transport: any ByteStreamTransport,
        on eventLoop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next(),
        streamLayer: ResponderStreamLayer? = nil
    ) async throws {
        let configuration = self.configuration
        let served: ServedLink
        do {
            let opened = try await transport.open(
                on: eventLoop,
                building: { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try ResponderPipeline.configureLink(
                            channel,
                            configuration: configuration,
                            streamLayer: streamLayer
                        )
                    }
                }
            )
            served = opened.output
            let sendQueue = opened.stream.sendQueue
            let transportClose = served.transportClose
            try await eventLoop.submit { transportClose.value.sendQueue = sendQueue }.get()
        } catch {
            throw ResponderError(.setupFailed, "could not open \(transport): \(error)", underlying: error)
        }
        await self.serve(served)
    }

    /// Listens on a unix socket at `path` and serves every connection (each is a link) until the
    /// task is cancelled. A stale socket file at `path` is removed first; the socket file is
    /// removed again when serving ends.
    ///
    /// - Throws: ``ResponderError`` (``ResponderError/Code/setupFailed``) if the socket cannot be
    ///   bound.
    ///
    /// `channelInitializer` runs first on every accepted connection, before the HTTP handlers
    /// are added: a TLS layer, for instance (`TLSServerContext.channelInitializer`).
    public func serveUnixSocket(
        path: String,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        channelInitializer: (@Sendable (any Channel) -> EventLoopFuture<Void>)? = nil
    ) async throws {
        try await self.serveUnixSocket(path: path, group: group, whenBound: nil, channelInitializer: channelInitializer)
    }

    /// Listens on a unix socket at `path` like ``serveUnixSocket(path:group:channelInitializer:)``,
    /// and calls `whenBound` with the path once the socket file exists, before the first
    /// connection is served: the place to set the socket file's mode and group.
    ///
    /// NIO binds and listens in one step, so a client can connect between the two; it is served
    /// only after `whenBound` returns. If `whenBound` throws, the socket is closed and removed
    /// and the error is rethrown. To keep that window closed to others, create the socket with a
    /// restrictive umask and widen its mode in `whenBound`.
    ///
    /// - Throws: ``ResponderError`` (``ResponderError/Code/setupFailed``) if the socket cannot be
    ///   bound, or what `whenBound` throws.
    public func serveUnixSocket(
        path: String,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        whenBound: (@Sendable (String) throws -> Void)?,
        channelInitializer: (@Sendable (any Channel) -> EventLoopFuture<Void>)? = nil
    ) async throws {
        let configuration = self.configuration
        let server: NIOAsyncChannel<ServedLink, Never>
        do {
            server = try await ServerBootstrap(group: group)
                .childChannelOption(.allowRemoteHalfClosure, value: true)
                .bind(unixDomainSocketPath: path, cleanupExistingSocketFile: true) { channel in
                    let prepared = channelInitializer?(channel) ?? channel.eventLoop.makeSucceededVoidFuture()
                    // TLS sits inside sessions on the host; a TLS listener's connections are
                    // independent streams that need none, so they are served plain.
                    let sessions = channelInitializer == nil
                    return prepared.flatMapThrowing {
                        try ResponderPipeline.configureLink(
                            channel,
                            configuration: configuration,
                            sessions: sessions,
                            halfCloses: true
                        )
                    }
                }
        } catch {
            // NIO's IOError names the system call; the reason is what people need.
            let reason = (error as? IOError).map { String(cString: strerror($0.errnoCode)) } ?? "\(error)"
            throw ResponderError(.setupFailed, "could not listen on unix socket \(path): \(reason)")
        }
        defer { _ = unlink(path) }
        if let whenBound {
            do {
                try whenBound(path)
            } catch {
                try? await server.channel.close()
                throw error
            }
        }
        // A graceful shutdown closes the listener (no new link) and lets the links end by
        // themselves.
        let listener = server.channel
        let stopListening = self.shutdown.onBegin { listener.close(promise: nil) }
        defer { self.shutdown.forget(stopListening) }
        do {
            try await server.executeThenClose { connections in
                await withDiscardingTaskGroup { group in
                    do {
                        for try await link in connections {
                            group.addTask { await self.serve(link) }
                        }
                    } catch {
                        self.logger.debug("unix socket listener ended", metadata: ["error": "\(error)"])
                    }
                    // Cancelled or the listener closed: stop the links still being served, unless
                    // they are ending gracefully.
                    if !self.shutdown.hasBegun || Task.isCancelled { group.cancelAll() }
                }
            }
        } catch {
            self.logger.debug("unix socket listener closed with error", metadata: ["error": "\(error)"])
        }
    }

    /// Serves a link until its transport closes: with a session layer, every stream the session
    /// layer ends (a HELLO, the host's CLOSE) gets fresh HTTP handlers and the next one is served.
    private func serve(_ served: ServedLink) async {
        let channel = served.channel
        self.shutdown.linkStarted()
        defer { self.shutdown.linkEnded() }
        // A graceful shutdown: the HTTP handlers end the link once what is under way is answered,
        // and the session layer takes no new session (a host's HELLO closes the transport, so
        // the host opens it again instead of sending a request into a session about to end).
        let sessionLayer = served.session
        let transportClose = served.transportClose
        let quiesce = self.shutdown.onBegin {
            channel.eventLoop.execute {
                // The close that waits until the host took what was written goes in at the
                // bottom now, before the event that makes the HTTP handlers end the link.
                try? channel.pipeline.syncOperations.addHandler(transportClose.value, position: .first)
                sessionLayer?.value.refuseNewSessions()
                channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
            }
        }
        defer { self.shutdown.forget(quiesce) }
        guard let session = served.session else {
            await self.serve(served.negotiated, on: channel)
            return
        }
        let eventLoop = channel.eventLoop
        let configuration = self.configuration
        var negotiated = served.negotiated
        while !Task.isCancelled {
            let boundary = eventLoop.flatSubmit { session.value.boundary(on: eventLoop) }
            let current = negotiated
            let ended: SessionResponderHandler.Boundary = await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.serve(current, on: channel) }
                let ended = (try? await boundary.get()) ?? .transportClosed
                // A new HELLO or the host's CLOSE: the handler still running (a long download, a
                // sleep) is stopped now, not when it next writes. When the HTTP layer ended the
                // stream itself, what it wrote is already below, and an HTTP/2 connection's loop
                // over its streams would otherwise wait for a stream that never comes.
                group.cancelAll()
                await group.waitForAll()
                return ended
            }
            // After a graceful shutdown's stream ended, no next one: the transport closes.
            guard ended != .transportClosed, !Task.isCancelled, !self.shutdown.hasBegun else { break }
            do {
                negotiated = try await eventLoop.flatSubmit {
                    ResponderPipeline.rebuild(
                        channel,
                        configuration: configuration,
                        streamLayer: served.streamLayer,
                        streamHandlers: served.streamHandlers.value
                    ).map { negotiated in
                        session.value.attach()
                        return negotiated
                    }
                }.get()
                // A shutdown that began while the handlers were renewed reached none of them.
                if self.shutdown.hasBegun {
                    channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
                }
            } catch {
                self.logger.debug("could not renew the link's HTTP handlers", metadata: ["error": "\(error)"])
                break
            }
        }
        try? await eventLoop.flatSubmit { session.value.closeTransport(on: eventLoop) }.get()
    }

    /// Serves one stream in the HTTP version its first bytes chose: HTTP/1.1 requests in order,
    /// or every HTTP/2 request stream at once, until the stream ends.
    private func serve(_ negotiated: EventLoopFuture<NegotiatedLink>, on channel: any Channel) async {
        // Waiting for the first bytes ends when the task is cancelled (the session layer ended
        // this stream before any byte of it came).
        let decided = channel.eventLoop.makePromise(of: NegotiatedLink.self)
        negotiated.cascade(to: decided)
        let outcome = await withTaskCancellationHandler {
            try? await decided.futureResult.get()
        } onCancel: {
            decided.fail(CancellationError())
        }
        guard let negotiated = outcome else {
            try? await channel.close()
            return
        }
        switch negotiated {
        case .http1(let link):
            let executor = LinkSession.executor(for: channel.eventLoop, self.configuration)
            await ClosingCancels.run(until: channel, on: executor) {
                var session = self.session(link)
                session.executor = executor
                await session.run()
            }
        case .http2(let streams):
            // Every stream's task runs on one executor (the connection's event loop by
            // default): a stream's request is then read, answered and written without waking
            // another thread. A stream the host resets (a cancel, a deadline) ends its
            // handler's work at once.
            let executor = LinkSession.executor(for: channel.eventLoop, self.configuration)
            let tasks = StreamTasks()
            let serveStream: @Sendable (ResponderLink) -> Void = { stream in
                tasks.start(until: stream.closeFuture, on: executor) {
                    var session = self.session(stream, http2: true)
                    session.executor = executor
                    await session.run()
                }
            }
            let over = channel.eventLoop.makePromise(of: Void.self)
            await withTaskCancellationHandler {
                channel.eventLoop.flatSubmit { streams.value.serve(serveStream) }.cascade(to: over)
                try? await over.futureResult.get()
            } onCancel: {
                tasks.cancelAll()
                over.succeed(())
            }
            await tasks.waitForAll()
            try? await channel.close()
        }
    }

    private func session(_ channel: ResponderLink, http2: Bool = false) -> LinkSession {
        LinkSession(
            channel: channel,
            configuration: self.configuration,
            handler: self.handler,
            logger: self.logger,
            http2: http2
        )
    }
}
