import AccessoryTransport
import NIOCore

/// The opener's session, in a channel pipeline: the bottom handler of a host's link. It sends
/// HELLO when the stream opens, drops everything until its HELLO_ACK, then carries the bytes
/// above in DATA frames and checks every frame that arrives (``SessionOpenerMachine`` decides;
/// this handler does the I/O and runs the timers).
///
/// Reading: it keeps one read outstanding below while it holds less than ``holdLimit`` bytes the
/// layer above has not asked for, so PINGs, PONGs and CLOSE are seen on an idle link while a
/// slow consumer still holds the device back.
///
/// Renewal in band: when the layer above gives the stream up with ``ByteStreamEndRequest``
/// (or claims a failed session with it), the session ends with CLOSE and the channel stays
/// open; ``renew(context:)`` later starts the next session on it with a fresh nonce, so a
/// restart never reopens the transport (no new child process, no tty reset).
final class SessionOpenerHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    static let holdLimit = 64 * 1024

    // Not private where the timers (SessionOpenerHandler+Timers.swift) use them.
    let configuration: SessionTransport.Configuration
    private var handshakePromise: EventLoopPromise<SessionInfo>
    var machine: SessionOpenerMachine?
    var context: ChannelHandlerContext?
    /// Payload bytes not yet handed up, gathered into one buffer: a read from below that brings
    /// several frames is handed up as one read, not one per frame.
    private var held = ByteBuffer()
    private var upstreamWantsRead = false
    var readingBelow = false
    private var pendingWrites: [(ByteBuffer, EventLoopPromise<Void>?)] = []
    var handshakeTimer: Scheduled<Void>?
    var helloResendTimer: Scheduled<Void>?
    var pingTimer: RepeatedTask?
    /// When the liveness timer last ran (it runs every half ping interval).
    var lastPingTick = NIODeadline.now()
    /// The kernel's send queue under the channel, when the transport knows it (set once the
    /// stream is open): with it, a device reading a backlog slowly is told from a dead one.
    var sendQueue: KernelSendQueue?
    var outbound = OutboundProgress()
    var established = false
    var ended = false
    /// The layer above gave the stream up and will renew it: a failure does not close the channel.
    private var parked = false

    init(configuration: SessionTransport.Configuration, handshakePromise: EventLoopPromise<SessionInfo>) {
        self.configuration = configuration
        self.handshakePromise = handshakePromise
    }

    // MARK: Lifecycle

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { self.start(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.stopTimers()
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        self.start(context: context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.stopTimers()
        if !self.established {
            self.handshakePromise.fail(
                SessionError(
                    .handshakeTimeout,
                    "the device closed the stream before answering HELLO: it does not speak sessions (try session=off)"
                )
            )
        }
        self.ended = true
        self.failPendingWrites()
        context.fireChannelInactive()
    }

    /// Starts the next session on the same channel (the previous one was given up with
    /// ``ByteStreamEndRequest``, or failed): a fresh nonce, everything of the old one dropped.
    /// The returned future completes when the device answered HELLO.
    func renew(context: ChannelHandlerContext) -> EventLoopFuture<SessionInfo> {
        guard context.channel.isActive else {
            return context.eventLoop.makeFailedFuture(
                SessionError(.closedByDevice, "the stream closed before the session could be restarted")
            )
        }
        if !self.ended, var machine = self.machine {
            let actions = machine.close()
            self.machine = machine
            self.run(actions, context: context)
        }
        self.stopTimers()
        self.failPendingWrites()
        self.handshakePromise = context.eventLoop.makePromise(of: SessionInfo.self)
        self.machine = nil
        self.held = ByteBuffer()
        self.upstreamWantsRead = false
        self.established = false
        self.ended = false
        self.parked = false
        self.start(context: context)
        return self.handshakePromise.futureResult
    }

    private func start(context: ChannelHandlerContext) {
        guard self.machine == nil else { return }
        let nonce = UInt64.random(in: 1...UInt64.max)
        var machine = SessionOpenerMachine(
            nonce: nonce,
            maxFrameSize: self.configuration.maxFrameSize,
            now: .now(),
            tracing: self.configuration.tracer != nil
        )
        let actions = machine.start()
        self.machine = machine
        let timeout = TimeAmount(self.configuration.handshakeTimeout)
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        self.handshakeTimer = context.eventLoop.scheduleTask(in: timeout) {
            let handler = bound.value
            guard !handler.established, let context = handler.context else { return }
            handler.fail(
                SessionError(
                    .handshakeTimeout,
                    "the device did not answer HELLO within \(handler.configuration.handshakeTimeout): it does not speak sessions (try session=off), or it is not there"
                ),
                context: context
            )
        }
        self.run(actions, context: context)
        context.flush()
        self.scheduleHelloResend(after: .milliseconds(250), context: context)
        self.readBelowIfNeeded(context: context)
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Mutated in place: a copy would share the reader's buffer and make it copy on write.
        guard !self.ended, let actions = self.machine?.received(self.unwrapInboundIn(data), now: .now()) else {
            return
        }
        self.run(actions, context: context)
        self.deliverHeld(context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.readingBelow = false
        context.flush()  // PONGs written while reading
        if self.parked {
            self.readWhileParked(context: context)
        } else {
            self.readBelowIfNeeded(context: context)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if self.parked, case .inputClosed = event as? ChannelEvent {
            // The device ended the transport between sessions: nothing above is reading.
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func read(context: ChannelHandlerContext) {
        guard !self.ended else {
            context.read()
            return
        }
        self.upstreamWantsRead = true
        if self.held.readableBytes > 0 {
            // Delivered outside this call: the handler above asked, it is not ready to be re-entered.
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            context.eventLoop.execute {
                guard let context = bound.value.context else { return }
                bound.value.deliverHeld(context: context)
            }
            return
        }
        self.readBelowIfNeeded(context: context)
    }

    /// Hands the held bytes up if the layer above asked for a read. The demand is consumed
    /// before the read is fired, so a `read()` the layer above makes while handling it (as it
    /// does when it wants more) is a new demand, not lost.
    private func deliverHeld(context: ChannelHandlerContext) {
        // With autoRead on (an HTTP/2 connection) the channel itself asks for every read, and
        // its asks do not pass through here while this handler keeps a read going: deliver.
        let autoRead = (try? context.channel.syncOptions?.getOption(ChannelOptions.autoRead)) ?? false
        guard self.upstreamWantsRead || autoRead, self.held.readableBytes > 0 else { return }
        self.upstreamWantsRead = false
        let bytes = self.held
        self.held = ByteBuffer()
        context.fireChannelRead(self.wrapInboundOut(bytes))
        context.fireChannelReadComplete()
        self.readBelowIfNeeded(context: context)
    }

    /// While the stream is parked nothing above reads, but the device may end the transport
    /// (a device's graceful shutdown half-closes it after its last session, and waits for the
    /// host to close): a read is kept going, so that the end is seen and the channel closes, and
    /// the next request opens the transport again rather than send HELLO to a device that is
    /// gone. What arrives meanwhile belongs to no session and is dropped.
    private func readWhileParked(context: ChannelHandlerContext) {
        guard self.parked, !self.readingBelow, context.channel.isActive else { return }
        self.readingBelow = true
        context.read()
    }

    private func readBelowIfNeeded(context: ChannelHandlerContext) {
        guard !self.readingBelow, !self.ended, context.channel.isActive else { return }
        guard !self.established || self.upstreamWantsRead || self.held.readableBytes < Self.holdLimit else { return }
        self.readingBelow = true
        context.read()
    }

    // MARK: Outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let bytes = self.unwrapOutboundIn(data)
        guard self.established else {
            if self.ended {
                promise?.fail(SessionError(.closedByDevice, "the session has ended"))
            } else {
                self.pendingWrites.append((bytes, promise))
            }
            return
        }
        guard let actions = self.machine?.send(bytes) else { return }
        self.run(actions, context: context, writePromise: promise)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard event is ByteStreamEndRequest else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        // Tell the device at once, so it stops sending what nobody will read; keep the channel.
        if self.established, !self.ended, var machine = self.machine {
            let actions = machine.close()
            self.machine = machine
            self.run(actions, context: context)
            context.flush()
        }
        self.ended = true
        self.parked = true
        self.stopTimers()
        self.failPendingWrites()
        self.held = ByteBuffer()
        promise?.succeed(())
        self.readWhileParked(context: context)
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode == .all, self.established, !self.ended, var machine = self.machine {
            // Tell the device at once, so it stops sending what nobody will read.
            let actions = machine.close()
            self.machine = machine
            self.run(actions, context: context)
            context.flush()
        }
        self.ended = true
        self.stopTimers()
        context.close(mode: mode, promise: promise)
    }

    // MARK: Actions

    func run(
        _ actions: [SessionOpenerMachine.Action],
        context: ChannelHandlerContext,
        writePromise: EventLoopPromise<Void>? = nil
    ) {
        var writePromise = writePromise
        // The caller's promise goes with the last write its bytes became.
        let lastWrite = actions.lastIndex { if case .write = $0 { true } else { false } }
        self.reserveHeldCapacity(for: actions)
        for (index, action) in actions.enumerated() {
            switch action {
            case .write(let bytes):
                self.outbound.wrote(bytes.readableBytes)
                if index == lastWrite {
                    context.write(self.wrapOutboundOut(bytes), promise: writePromise)
                    writePromise = nil
                } else {
                    context.write(self.wrapOutboundOut(bytes), promise: nil)
                }
            case .deliver(let bytes):
                if self.held.readableBytes == 0 && self.held.capacity == 0 {
                    self.held = bytes  // the only payload: handed up as it came, not copied
                } else {
                    self.held.writeImmutableBuffer(bytes)
                }
            case .established(let version, let peerMaxFrame):
                self.established = true
                self.handshakeTimer?.cancel()
                self.helloResendTimer?.cancel()
                self.startPinging(context: context)
                for (bytes, promise) in self.pendingWrites {
                    self.write(context: context, data: self.wrapOutboundOut(bytes), promise: promise)
                }
                self.pendingWrites.removeAll()
                self.handshakePromise.succeed(SessionInfo(version: version, peerMaxFrameSize: peerMaxFrame))
            case .endOfStream:
                self.endOfStream(context: context)
            case .fail(let error):
                self.fail(error, context: context)
            case .trace(let frame, let sent):
                self.configuration.tracer?("\(sent ? ">" : "<") session \(frame)")
            }
        }
        writePromise?.succeed(())
    }

    /// The payloads of a read's frames are gathered into one buffer for the layer above (one
    /// read through the HTTP layer costs more than the copy): sized once, not grown frame by frame.
    private func reserveHeldCapacity(for actions: [SessionOpenerMachine.Action]) {
        var count = 0
        var total = self.held.readableBytes
        for case .deliver(let bytes) in actions {
            count += 1
            total += bytes.readableBytes
        }
        guard count > 1 || (count == 1 && self.held.readableBytes > 0) else { return }
        var gathered = ByteBuffer()
        gathered.reserveCapacity(total)
        gathered.writeImmutableBuffer(self.held)
        self.held = gathered
    }

    func fail(_ error: SessionError, context: ChannelHandlerContext) {
        guard !self.ended else { return }
        self.ended = true
        self.stopTimers()
        self.failPendingWrites()
        if self.established {
            // A layer above that renews streams claims this one while it handles the error
            // (``ByteStreamEndRequest``); then the channel stays open for the next session.
            context.fireErrorCaught(error)
            if self.parked { return }
        } else {
            self.handshakePromise.fail(error)
        }
        context.close(promise: nil)
    }

    /// The device ended the session cleanly (CLOSE 01): what came before it goes up, then an end
    /// of input (a body delimited by the stream's end is complete), then the session's end as an
    /// error, which a layer above that renews streams claims (``ByteStreamEndRequest``). The
    /// channel then stays open and the next request starts a new session in band (docs/framing.md
    /// §4) instead of reopening the transport: a new child process, a tty or USB interface opened
    /// again. Without such a layer the channel closes, as at the transport's own end.
    private func endOfStream(context: ChannelHandlerContext) {
        if self.held.readableBytes > 0 {
            let bytes = self.held
            self.held = ByteBuffer()
            context.fireChannelRead(self.wrapInboundOut(bytes))
            context.fireChannelReadComplete()
        }
        context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        self.fail(SessionError(.closedByDevice, "the device ended the session"), context: context)
    }

    private func failPendingWrites() {
        let writes = self.pendingWrites
        self.pendingWrites.removeAll()
        for (_, promise) in writes {
            promise?.fail(SessionError(.closedByDevice, "the session ended before the write"))
        }
    }
}

@available(*, unavailable)
extension SessionOpenerHandler: Sendable {}
