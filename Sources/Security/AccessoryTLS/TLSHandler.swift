import Logging
import NIOCore

/// The TLS layer in a NIO pipeline: ciphertext `ByteBuffer`s below, plaintext `ByteBuffer`s
/// above. Add it first (nearest the byte stream), then the protocol handlers.
///
/// States: idle → handshaking → active → closing → closed. Writes made before the handshake
/// completes are held and sent after it. Closing sends close_notify and waits (bounded by
/// ``TLSConfiguration/shutdownTimeout``) for the peer's. After any TLS failure the alert is
/// sent, the error is passed up (`errorCaught`) and the channel is closed, so a link is never
/// left half-open.
///
/// End of file: HTTP/1.1 framing is self-delimiting (Content-Length, chunked), except for a
/// response body that runs to the end of the connection. OpenSSL 3 reports a stream that ends
/// without close_notify as `unexpected eof while reading`; that is not ignored
/// (`SSL_OP_IGNORE_UNEXPECTED_EOF` stays off): it is passed up as ``TLSError/Code/truncated``
/// before the channel goes inactive. An HTTP exchange that was complete is unaffected (the
/// link simply reopens for the next one); one that was not — including a body delimited by
/// the end of the connection, which only close_notify can prove complete — fails with that
/// error instead of being taken as whole.
public final class TLSHandler: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = IOData
    public typealias OutboundOut = ByteBuffer

    private enum State {
        case idle
        case handshaking
        case active
        case closing
        case closed
    }

    let connection: TLSConnection
    let configuration: TLSConfiguration
    private var state = State.idle
    private var handshakePromise: EventLoopPromise<TLSSessionInfo>?
    private var bufferedWrites: [(ByteBuffer, EventLoopPromise<Void>?)] = []
    private var flushRequested = false
    private var upstreamWantsRead = false
    private var deliveredPlaintext = false
    private var closePromises: [EventLoopPromise<Void>] = []
    private var timer: Scheduled<Void>?
    private let logger = Logger(label: "accessory-http.tls")

    /// The handshake's outcome.
    public var handshakeFuture: EventLoopFuture<TLSSessionInfo>? { self.handshakePromise?.futureResult }

    init(connection: TLSConnection, configuration: TLSConfiguration, handshakePromise: EventLoopPromise<TLSSessionInfo>)
    {
        self.connection = connection
        self.configuration = configuration
        self.handshakePromise = handshakePromise
    }

    var trustEvaluator: ServerTrustEvaluator? { self.connection.evaluator }

    // MARK: Lifecycle

    public func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { self.startHandshake(context: context) }
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.failEverything(
            TLSError(.closedDuringHandshake, "the TLS handler was removed before the handshake finished")
        )
    }

    /// Adds the handler at the end of `channel`'s pipeline; call it on the channel's event loop.
    /// Use it rather than the pipeline's own `addHandler`: when the handler cannot join (the
    /// channel closed meanwhile, say a responder shutting down as a new session began), its
    /// handshake fails at once, with ``TLSError/Code/closedDuringHandshake``, instead of being
    /// dropped unfulfilled, which NIO's debug builds stop the process for.
    ///
    /// - Throws: the pipeline's error.
    public func add(to channel: any Channel) throws {
        do {
            try channel.pipeline.syncOperations.addHandler(self)
        } catch {
            self.failEverything(
                TLSError(.closedDuringHandshake, "the TLS handler could not join the link's pipeline: \(error)")
            )
            throw error
        }
    }

    public func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        if case .idle = self.state { self.startHandshake(context: context) }
    }

    public func channelInactive(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        switch self.state {
        case .idle, .handshaking:
            self.state = .closed
            self.failEverything(self.handshakeCutShort())
        case .active:
            self.state = .closed
            if !self.connection.receivedCloseNotify {
                context.fireErrorCaught(self.truncationError())
            }
            self.failEverything(TLSError(.truncated, "the link closed"))
        case .closing, .closed:
            self.state = .closed
            self.failEverything(TLSError(.truncated, "the link closed"))
        }
        let promises = self.closePromises
        self.closePromises.removeAll()
        for promise in promises { promise.succeed() }
        context.fireChannelInactive()
    }

    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            // The ciphertext stream ended. TLS has its own end marker (close_notify); the
            // byte stream's end is handled like the channel closing.
            switch self.state {
            case .idle, .handshaking:
                self.fail(context: context, error: self.handshakeCutShort())
            case .active:
                if !self.connection.receivedCloseNotify { context.fireErrorCaught(self.truncationError()) }
                self.state = .closed
                context.close(promise: nil)
            case .closing:
                self.finishClosing(context: context)
            case .closed:
                break
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    public func errorCaught(context: ChannelHandlerContext, error: any Error) {
        switch self.state {
        case .idle, .handshaking:
            self.fail(
                context: context,
                error: TLSError(.closedDuringHandshake, "the link failed during the TLS handshake: \(error)")
            )
        default:
            context.fireErrorCaught(error)
        }
    }

    // MARK: Inbound

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let ciphertext = self.unwrapInboundIn(data)
        self.connection.feed(ciphertext)
        switch self.state {
        case .idle:
            self.startHandshake(context: context)
            if case .handshaking = self.state { self.startHandshakeTimer(context: context) }
        case .handshaking:
            self.startHandshakeTimer(context: context)
            self.driveHandshake(context: context)
        case .active:
            self.readPlaintext(context: context)
        case .closing:
            self.readPlaintext(context: context)
            if case .closing = self.state, self.connection.receivedCloseNotify { self.finishClosing(context: context) }
        case .closed:
            break
        }
    }

    public func channelReadComplete(context: ChannelHandlerContext) {
        if self.deliveredPlaintext {
            self.deliveredPlaintext = false
            context.fireChannelReadComplete()
        } else if self.upstreamWantsRead, case .active = self.state {
            // The records read so far held no application data (a TLS 1.3 ticket, say):
            // the reader above still waits, so ask for more.
            context.read()
        }
    }

    // MARK: Outbound

    public func read(context: ChannelHandlerContext) {
        self.upstreamWantsRead = true
        context.read()
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let buffer: ByteBuffer
        switch self.unwrapOutboundIn(data) {
        case .byteBuffer(let bytes):
            buffer = bytes
        case .fileRegion:
            promise?.fail(TLSError(.protocolError, "file regions cannot be sent over TLS; send the bytes instead"))
            return
        }
        switch self.state {
        case .idle, .handshaking:
            self.bufferedWrites.append((buffer, promise))
        case .active:
            self.encrypt(buffer, context: context, promise: promise)
        case .closing, .closed:
            promise?.fail(ChannelError.ioOnClosedChannel)
        }
    }

    public func flush(context: ChannelHandlerContext) {
        switch self.state {
        case .idle, .handshaking:
            self.flushRequested = true
        default:
            context.flush()
        }
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .all else {
            context.close(mode: mode, promise: promise)
            return
        }
        switch self.state {
        case .idle, .handshaking:
            self.state = .closed
            self.failEverything(TLSError(.closedDuringHandshake, "the link was closed during the TLS handshake"))
            context.close(promise: promise)
        case .active:
            self.state = .closing
            if let promise { self.closePromises.append(promise) }
            _ = self.connection.shutdown()  // queues close_notify
            self.sendOutput(context: context)
            if self.connection.receivedCloseNotify {
                self.finishClosing(context: context)
                return
            }
            self.timer = context.eventLoop.assumeIsolated().scheduleTask(
                in: TimeAmount(self.configuration.shutdownTimeout)
            ) {
                [self] in
                self.finishClosing(context: context)
            }
            context.read()
        case .closing:
            if let promise { self.closePromises.append(promise) }
        case .closed:
            context.close(mode: mode, promise: promise)
        }
    }

    // MARK: Steps

    private func startHandshake(context: ChannelHandlerContext) {
        guard case .idle = self.state else { return }
        self.state = .handshaking
        // A server waits for its client as long as it takes (a device's link is idle until a
        // host comes): its bound starts with the client's first byte.
        if self.configuration.role == .client { self.startHandshakeTimer(context: context) }
        self.driveHandshake(context: context)
    }

    private func startHandshakeTimer(context: ChannelHandlerContext) {
        guard self.timer == nil else { return }
        self.timer = context.eventLoop.assumeIsolated().scheduleTask(
            in: TimeAmount(self.configuration.handshakeTimeout)
        ) {
            [self] in
            if case .handshaking = self.state {
                self.fail(
                    context: context,
                    error: TLSError(
                        .handshakeTimeout,
                        "the TLS handshake with the \(self.peerName) did not finish within \(TimeAmount(self.configuration.handshakeTimeout).nanoseconds / 1_000_000) ms; does the \(self.peerName) speak TLS on this link?"
                    )
                )
            }
        }
    }

    private func driveHandshake(context: ChannelHandlerContext) {
        switch self.connection.handshake() {
        case .complete:
            self.timer?.cancel()
            self.timer = nil
            self.state = .active
            self.sendOutput(context: context)
            let info = self.connection.sessionInfo()
            self.handshakePromise?.succeed(info)
            self.handshakePromise = nil
            let writes = self.bufferedWrites
            self.bufferedWrites.removeAll()
            for (buffer, promise) in writes { self.encrypt(buffer, context: context, promise: promise) }
            if self.flushRequested {
                self.flushRequested = false
                context.flush()
            }
            // Application data may have come with the last handshake records.
            self.readPlaintext(context: context)
        case .incomplete:
            self.sendOutput(context: context)
            context.read()
        case .closed:
            self.fail(
                context: context,
                error: TLSError(.closedDuringHandshake, "the \(self.peerName) ended TLS during the handshake")
            )
        case .failed(let error):
            self.fail(context: context, error: error)
        }
    }

    private func readPlaintext(context: ChannelHandlerContext) {
        while true {
            var buffer = context.channel.allocator.buffer(capacity: 16 * 1024)
            switch self.connection.read(into: &buffer) {
            case .complete:
                if buffer.readableBytes > 0, case .active = self.state {
                    self.deliveredPlaintext = true
                    self.upstreamWantsRead = false
                    context.fireChannelRead(self.wrapInboundOut(buffer))
                }
                continue
            case .incomplete:
                self.sendOutput(context: context)
                return
            case .closed:
                // close_notify: answer with ours and close the link.
                self.sendOutput(context: context)
                if case .active = self.state {
                    self.state = .closing
                    _ = self.connection.shutdown()
                    self.sendOutput(context: context)
                }
                if self.deliveredPlaintext {
                    self.deliveredPlaintext = false
                    context.fireChannelReadComplete()
                }
                self.finishClosing(context: context)
                return
            case .failed(let error):
                self.sendOutput(context: context)
                if self.deliveredPlaintext {
                    self.deliveredPlaintext = false
                    context.fireChannelReadComplete()
                }
                self.state = .closed
                context.fireErrorCaught(error)
                context.close(promise: nil)
                return
            }
        }
    }

    private func encrypt(_ buffer: ByteBuffer, context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        switch self.connection.write(buffer) {
        case .complete, .incomplete:
            if let ciphertext = self.connection.takeOutput(allocator: context.channel.allocator) {
                context.write(self.wrapOutboundOut(ciphertext), promise: promise)
            } else {
                promise?.succeed()
            }
        case .closed:
            promise?.fail(ChannelError.ioOnClosedChannel)
        case .failed(let error):
            promise?.fail(error)
            self.sendOutput(context: context)
            self.state = .closed
            context.fireErrorCaught(error)
            context.close(promise: nil)
        }
    }

    private func sendOutput(context: ChannelHandlerContext) {
        if let ciphertext = self.connection.takeOutput(allocator: context.channel.allocator) {
            context.writeAndFlush(self.wrapOutboundOut(ciphertext), promise: nil)
        }
    }

    private func finishClosing(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        // Once only: the peer's close_notify, the end of input and the timer may all ask.
        if case .closed = self.state { return }
        self.state = .closed
        let promises = self.closePromises
        self.closePromises.removeAll()
        let closed = context.eventLoop.makePromise(of: Void.self)
        for promise in promises { promise.completeWith(closed.futureResult) }
        context.close(promise: closed)
    }

    /// Fails the handshake: sends the alert OpenSSL queued, and closes the link.
    private func fail(context: ChannelHandlerContext, error: TLSError) {
        self.timer?.cancel()
        self.timer = nil
        self.sendOutput(context: context)
        self.state = .closed
        self.failEverything(error)
        context.close(promise: nil)
    }

    private func failEverything(_ error: TLSError) {
        self.handshakePromise?.fail(error)
        self.handshakePromise = nil
        let writes = self.bufferedWrites
        self.bufferedWrites.removeAll()
        for (_, promise) in writes { promise?.fail(error) }
    }
}

@available(*, unavailable)
extension TLSHandler: Sendable {}
