import NIOCore

/// Sent up the pipeline when the HTTP stream above ends because of the session layer (a new
/// HELLO, the host's CLOSE, an integrity error): the HTTP layer must stop at once, and nothing
/// it writes from now on reaches the host.
public struct SessionStreamEnded: Sendable, Hashable {}

/// The responder's session layer, in a channel pipeline, below the HTTP handlers
/// (docs/framing.md §6): it serves plain HTTP/1.1 until a valid HELLO arrives, then carries the
/// HTTP stream in frames. Every time the HTTP stream ends (``boundary(on:)``), the owner of the
/// pipeline replaces the HTTP handlers with fresh ones and calls ``attach()``.
///
/// Reading follows the HTTP layer (the channel's autoRead, held back by the responder while
/// request parts pile up): while it sends a response it keeps reading, so a HELLO is seen in
/// the middle of a long answer. Bytes that arrive while no HTTP layer is attached (between a
/// HELLO and the new handlers) are held and delivered on ``attach()``.
public final class SessionResponderHandler: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    /// Why the HTTP stream above ended.
    public enum Boundary: Sendable, Equatable {
        /// A HELLO started a new session; the new stream is already waiting.
        case restart
        /// The host ended its session with CLOSE; plain HTTP/1.1 or a HELLO comes next.
        case closedByHost
        /// The host's bytes could not be verified; CLOSE 02 was sent, a HELLO comes next.
        case integrity
        /// The HTTP layer closed its stream inside a session (CLOSE 01 was sent).
        case endedByResponder
        /// A HELLO came after ``refuseNewSessions()``: it was not answered, and the transport
        /// is closing.
        case refused
        /// The transport itself closed or its input ended: stop serving.
        case transportClosed
    }

    private var machine: SessionResponderMachine
    private let tracer: (@Sendable (String) -> Void)?
    private var context: ChannelHandlerContext?
    private var attached = true
    private var boundaryPromise: EventLoopPromise<Boundary>?
    private var currentBoundary: Boundary?
    private var held = CircularBuffer<ByteBuffer>()
    private var deliveredThisRead = false
    /// Bytes for the HTTP layer from the read being processed.
    private var pending = ByteBuffer()
    private var inputClosed = false
    private var closingTransport = false
    private var stallTimer: Scheduled<Void>?
    /// Whether a read is under way: asked for from above (or by ``attach()``) and not yet ended
    /// by `channelReadComplete`. The stall clock runs only then: while the HTTP layer holds
    /// reading back, the host is held back too, and a frame cut short by that is not stalled.
    private var reading = false

    /// Whether a close from above in plain mode ends only that stream (``Boundary/endedByResponder``)
    /// instead of the transport: for a TLS layer above, whose connection ends while the line
    /// stays, so that the next host's handshake gets a fresh TLS layer. Event loop only.
    public var plainStreamsEndAlone = false

    /// A handler in plain mode.
    ///
    /// - Parameter tracer: receives one line per session frame sent (`>`) or received (`<`), for
    ///   `-v`; `nil` (the default) traces nothing.
    public init(tracer: (@Sendable (String) -> Void)? = nil) {
        self.tracer = tracer
        self.machine = SessionResponderMachine(tracing: tracer != nil)
    }

    /// The current mode (plain, session, hunting). Event loop only.
    public var mode: SessionResponderMachine.Mode { self.machine.mode }

    /// Completes when the current HTTP stream ends. Call on the event loop.
    public func boundary(on eventLoop: any EventLoop) -> EventLoopFuture<Boundary> {
        if let boundary = self.currentBoundary { return eventLoop.makeSucceededFuture(boundary) }
        if let promise = self.boundaryPromise { return promise.futureResult }
        let promise = eventLoop.makePromise(of: Boundary.self)
        self.boundaryPromise = promise
        return promise.futureResult
    }

    /// A new HTTP layer is in place above: the stream that waited for it flows. Event loop only.
    public func attach() {
        guard let context = self.context, !self.attached, self.currentBoundary != .transportClosed else { return }
        self.attached = true
        self.currentBoundary = nil
        self.boundaryPromise = nil
        self.deliverHeld(context: context)
        if self.inputClosed {
            context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            return
        }
        self.reading = true
        context.read()
        self.watchForStall(context: context)
    }

    /// The responder is going away (a graceful shutdown began): the stream under way is served
    /// on, but a HELLO from now on is not answered; the transport closes instead, so the host
    /// opens it again rather than sending a request into a session that would end under it
    /// (docs/framing.md §3). Event loop only.
    public func refuseNewSessions() {
        self.machine.refuseNewSessions()
    }

    /// Closes the transport itself (a close from the HTTP layer inside a session only ends that
    /// session). Event loop only.
    public func closeTransport(on eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        guard let context = self.context else { return eventLoop.makeSucceededVoidFuture() }
        self.closingTransport = true
        let promise = context.eventLoop.makePromise(of: Void.self)
        context.close(mode: .all, promise: promise)
        return promise.futureResult
    }

    // MARK: Lifecycle

    public func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        self.stallTimer?.cancel()
        self.context = nil
        self.end(.transportClosed)
    }

    public func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
    }

    public func channelInactive(context: ChannelHandlerContext) {
        self.end(.transportClosed)
        context.fireChannelInactive()
    }

    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .inputClosed = event as? ChannelEvent {
            self.inputClosed = true
            if let tail = self.machine.drainHeldPlainBytes() { self.held.append(tail) }
            if !self.attached { return }  // passed on in attach()
            self.deliverHeld(context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    // MARK: Inbound

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let actions = self.machine.received(self.unwrapInboundIn(data))
        self.run(actions, context: context)
        self.handUp(context: context)
        self.watchForStall(context: context)
    }

    /// The payload of every frame of one read from below goes up as one read.
    private func handUp(context: ChannelHandlerContext) {
        guard self.attached, self.pending.readableBytes > 0 else { return }
        let bytes = self.pending
        self.pending = ByteBuffer()
        self.deliveredThisRead = true
        context.fireChannelRead(self.wrapInboundOut(bytes))
    }

    /// How long part of a frame may wait for its next byte, while the responder is reading,
    /// before it is given up on.
    public static let stallTimeout = TimeAmount.milliseconds(250)

    /// Arms (or disarms) the stall timer: part of a frame that gets no further byte within
    /// ``stallTimeout`` of reading is given up on (``SessionResponderMachine/stalled()``).
    private func watchForStall(context: ChannelHandlerContext) {
        self.stallTimer?.cancel()
        self.stallTimer = nil
        guard self.reading, self.machine.hasPartialInput else { return }
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        self.stallTimer = context.eventLoop.scheduleTask(in: Self.stallTimeout) {
            let handler = bound.value
            guard let context = handler.context else { return }
            handler.stallTimer = nil
            handler.run(handler.machine.stalled(), context: context)
            handler.handUp(context: context)
            if handler.deliveredThisRead {
                handler.deliveredThisRead = false
                context.fireChannelReadComplete()
            }
            context.flush()
            handler.watchForStall(context: context)
        }
    }

    public func channelReadComplete(context: ChannelHandlerContext) {
        // The read is over; the clock stops until the next is asked for (before the HTTP layer
        // hears of this one, since it may ask for the next at once).
        self.reading = false
        self.watchForStall(context: context)
        if self.deliveredThisRead {
            self.deliveredThisRead = false
            context.fireChannelReadComplete()
        }
        context.flush()  // PONGs, HELLO_ACKs
    }

    private func deliverHeld(context: ChannelHandlerContext) {
        guard self.attached, !self.held.isEmpty else { return }
        while let bytes = self.held.popFirst() {
            context.fireChannelRead(self.wrapInboundOut(bytes))
        }
        context.fireChannelReadComplete()
    }

    // MARK: Outbound

    public func read(context: ChannelHandlerContext) {
        self.reading = true
        context.read()
        // A second ask before the read ends does not restart a running clock.
        if self.stallTimer == nil { self.watchForStall(context: context) }
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard self.attached else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        self.run(self.machine.send(self.unwrapOutboundIn(data)), context: context, writePromise: promise)
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .all, context.channel.isActive, !self.inputClosed, !self.closingTransport else {
            context.close(mode: mode, promise: promise)
            return
        }
        if !self.attached {
            // The HTTP layer of a stream the session layer already ended closes: nothing to do.
            promise?.succeed(())
            return
        }
        guard let actions = self.machine.endStream() else {
            if self.plainStreamsEndAlone {
                self.detach(.endedByResponder, context: context)
                promise?.succeed(())
                return
            }
            context.close(mode: mode, promise: promise)  // plain HTTP/1.1: the connection closes
            return
        }
        self.run(actions, context: context)
        context.flush()
        self.detach(.endedByResponder, context: context)
        promise?.succeed(())
    }

    // MARK: Actions

    private func run(
        _ actions: [SessionResponderMachine.Action],
        context: ChannelHandlerContext,
        writePromise: EventLoopPromise<Void>? = nil
    ) {
        var writePromise = writePromise
        // The caller's promise goes with the last write its bytes became.
        let lastWrite = actions.lastIndex { if case .write = $0 { true } else { false } }
        for (index, action) in actions.enumerated() {
            switch action {
            case .deliver(let bytes):
                if !self.attached {
                    self.held.append(bytes)
                } else if self.pending.readableBytes == 0 {
                    self.pending = bytes
                } else {
                    self.pending.writeImmutableBuffer(bytes)
                }
            case .write(let bytes):
                if index == lastWrite {
                    context.write(self.wrapOutboundOut(bytes), promise: writePromise)
                    writePromise = nil
                } else {
                    context.write(self.wrapOutboundOut(bytes), promise: nil)
                }
            case .abandon(let why):
                // The old stream's unread input is dropped; its HTTP layer is told to stop.
                self.held.removeAll()
                self.pending = ByteBuffer()
                if self.deliveredThisRead {
                    self.deliveredThisRead = false
                    context.fireChannelReadComplete()
                }
                switch why {
                case .restart: self.detach(.restart, context: context)
                case .closedByHost: self.detach(.closedByHost, context: context)
                case .integrity: self.detach(.integrity, context: context)
                case .refused:
                    self.detach(.refused, context: context)
                    if !self.closingTransport {
                        self.closingTransport = true
                        context.close(mode: .all, promise: nil)
                    }
                }
            case .trace(let frame, let sent):
                self.tracer?("\(sent ? ">" : "<") session \(frame)")
            }
        }
        if let writePromise {
            writePromise.fail(ChannelError.ioOnClosedChannel)
        }
    }

    private func detach(_ boundary: Boundary, context: ChannelHandlerContext) {
        if self.attached {
            self.attached = false
            context.fireUserInboundEventTriggered(SessionStreamEnded())
        }
        self.end(boundary)
    }

    /// Records why the current HTTP stream ended (the first reason wins, except that a closed
    /// transport overrides everything) and tells whoever waits.
    private func end(_ boundary: Boundary) {
        guard self.currentBoundary == nil || boundary == .transportClosed else { return }
        self.currentBoundary = boundary
        if let promise = self.boundaryPromise {
            self.boundaryPromise = nil
            promise.succeed(boundary)
        }
    }
}

@available(*, unavailable)
extension SessionResponderHandler: Sendable {}
