import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// The last handler of a client link's pipeline: runs one exchange at a time through the
/// ``LinkStateMachine``, streams the response body to an async consumer with back-pressure
/// (reading from the device only while the consumer wants more), drains abandoned responses,
/// and enforces the idle, exchange, drain and continue timeouts.
///
/// Everything here runs on the channel's event loop. The async side reaches it through
/// `NIOLoopBound` and the exchange's futures.
final class HTTPLinkHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    /// The promises and body source of the exchange in progress.
    private struct Ports {
        let id: UInt64
        var head: EventLoopPromise<HTTPResponse>?
        var mayWriteBody: EventLoopPromise<Bool>?
        var completion: EventLoopPromise<Bool>?
        var source: ResponseBodyProducer.Source?
        /// The body gathered before the consumer claims it (instead of `source`).
        var pending: PendingResponseBody?
        var consumerWantsMore = true
        var timers: [Scheduled<Void>] = []
        /// An in-memory body held back until `100 Continue` (or the continue timeout).
        var heldBody: ByteBuffer?
    }

    /// The largest single read from the device (the receive allocator's maximum).
    static let maximumReadSize = 256 * 1024

    private var machine: LinkStateMachine
    private var ports: Ports?
    private var context: ChannelHandlerContext?
    private let guardHandler: LinkGuardHandler
    private let configuration: LinkConfiguration
    private var readPending = false
    private var lastInbound = NIODeadline.now()
    private var idleTimer: Scheduled<Void>?
    private var writabilityWaiters: [EventLoopPromise<Void>] = []
    private var settling: EventLoopPromise<Void>?
    private var settleTimer: Scheduled<Void>?
    /// Why the link broke, for the exchange that asks next.
    private(set) var failure: HTTPLinkError?
    private var isActive = false

    private let eventLoop: any EventLoop

    /// Close the stream instead of draining an abandoned response (the transport opens
    /// independent streams cheaply; see `ByteStreamTransport.opensIndependentStreams`).
    private let closesAbandonedStreams: Bool

    init(
        configuration: LinkConfiguration,
        guardHandler: LinkGuardHandler,
        eventLoop: any EventLoop,
        closesAbandonedStreams: Bool = false
    ) {
        self.eventLoop = eventLoop
        self.closesAbandonedStreams = closesAbandonedStreams
        self.configuration = configuration
        self.guardHandler = guardHandler
        self.machine = LinkStateMachine(drainLimit: configuration.drainLimit)
    }

    /// Whether the link can carry the next exchange.
    var isUsable: Bool { self.isActive && self.machine.state == .idle && self.failure == nil }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.isActive = context.channel.isActive
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        self.isActive = true
        self.readIfNeeded()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.isActive = false
        self.fail(HTTPLinkError(.linkClosed, "the device closed the link before the response was complete"))
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.lastInbound = .now()
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.received(head: head)
        case .body(let buffer):
            self.received(body: buffer)
        case .end:
            self.receivedEnd()
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.readPending = false
        self.readIfNeeded()
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.fail(Self.linkError(for: error, responseStart: self.guardHandler.responseStart))
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            let waiters = self.writabilityWaiters
            self.writabilityWaiters.removeAll()
            for waiter in waiters { waiter.succeed() }
        }
        context.fireChannelWritabilityChanged()
    }

    // MARK: Settling after a reopen

    /// Discards input until the line has been quiet for the configured period (or the maximum
    /// settle time passed). Used after reopening a transport that may carry stale bytes.
    func settle() -> EventLoopFuture<Void> {
        guard let context = self.context else {
            return self.eventLoopFailure(HTTPLinkError(.linkClosed, "the link closed while settling"))
        }
        let promise = context.eventLoop.makePromise(of: Void.self)
        self.settling = promise
        self.guardHandler.mode = .discard
        let started = NIODeadline.now()
        let quiet = TimeAmount(self.configuration.settleQuietPeriod)
        let maximum = TimeAmount(self.configuration.settleMaxDuration)
        var discarded = 0
        self.guardHandler.onDiscard = { [weak self] count in
            discarded += count
            self?.lastInbound = .now()
        }
        self.lastInbound = started
        func check() {
            guard let settling = self.settling else { return }
            let now = NIODeadline.now()
            if now - self.lastInbound >= quiet || now - started >= maximum {
                self.settling = nil
                self.guardHandler.onDiscard = nil
                self.guardHandler.mode = .idle
                if discarded > 0 {
                    self.configuration.tracer?.emit(.note("discarded \(discarded) stale byte(s) after reopening"))
                }
                settling.succeed()
            } else {
                self.settleTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: self.lastInbound + quiet) {
                    check()
                }
            }
        }
        self.settleTimer = context.eventLoop.assumeIsolated().scheduleTask(in: quiet) { check() }
        self.readIfNeeded()
        return promise.futureResult
    }

    // MARK: Exchanges (called by the async side, on the event loop)

    enum RequestBodyStart {
        case none
        /// A body known up front: written with the head, in one flush.
        case complete(ByteBuffer)
        /// A body the caller streams with ``writeBody(id:_:)`` and ``endRequest(id:)``.
        case streamed
    }

    /// - Parameter pendingBody: gather the body until the consumer claims it on this event loop
    ///   (only for a consumer that runs on it), instead of streaming it from the start.
    func startExchange(
        id: UInt64,
        head: HTTPRequestHead,
        body: RequestBodyStart,
        deadline: NIODeadline?,
        pendingBody: Bool = false,
        bodyHandler: NIOLoopBound<HTTPLinkHandler>
    ) throws(HTTPLinkError) -> ExchangeHandle {
        guard let context = self.context, self.isUsable else {
            throw self.failure ?? HTTPLinkError(.linkClosed, "the link is closed")
        }
        let expectsContinue: Bool
        if case .none = body { expectsContinue = false } else { expectsContinue = Self.expectsContinue(head) }
        guard
            self.machine.startExchange(
                id: id,
                isHeadRequest: head.method == .HEAD,
                expectsContinue: expectsContinue
            ) == .start
        else {
            throw HTTPLinkError(.invalidRequest, "an exchange is already in progress on this link")
        }
        let eventLoop = context.eventLoop
        let headPromise = eventLoop.makePromise(of: HTTPResponse.self)
        var mayWriteBody: EventLoopPromise<Bool>? = nil
        if case .streamed = body { mayWriteBody = eventLoop.makePromise(of: Bool.self) }
        let completion = eventLoop.makePromise(of: Bool.self)
        var ports = Ports(id: id, head: headPromise, mayWriteBody: mayWriteBody, completion: completion)
        let handleBody: ExchangeHandle.Body
        if pendingBody {
            let pending = PendingResponseBody()
            ports.pending = pending
            handleBody = .pending(NIOLoopBound(pending, eventLoop: eventLoop))
        } else {
            let producer = self.makeBodyProducer(id: id, bodyHandler: bodyHandler)
            ports.source = producer.source
            handleBody = .stream(producer.sequence)
        }
        let handle = ExchangeHandle(
            id: id,
            head: headPromise.futureResult,
            mayWriteBody: mayWriteBody?.futureResult,
            completion: completion.futureResult,
            body: handleBody
        )
        if let deadline {
            ports.timers.append(
                eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { self.exchangeTimedOut(id: id) }
            )
        }
        if expectsContinue {
            ports.timers.append(
                eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(self.configuration.expectContinueTimeout)) {
                    if self.machine.continueTimedOut(id: id) { self.releaseRequestBody() }
                }
            )
        }
        self.ports = ports
        self.guardHandler.mode = .startLine(seen: 0)
        self.configuration.tracer?.emit(.requestHead(Self.render(head)))

        context.write(self.wrapOutboundOut(.head(head)), promise: nil)
        switch body {
        case .none:
            self.resolveMayWriteBody(false)
            context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
            self.apply(self.machine.requestEnded(id: id))
        case .complete(let buffer) where !expectsContinue:
            self.resolveMayWriteBody(true)
            if buffer.readableBytes > 0 {
                self.configuration.tracer?.emit(.requestBody(buffer))
                context.write(self.wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
            }
            context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
            self.apply(self.machine.requestEnded(id: id))
        case .complete(let buffer):
            // Held back until the device says `100 Continue` (or the continue timeout passes).
            self.ports?.heldBody = buffer
            context.flush()
        case .streamed:
            context.flush()
            if !expectsContinue { self.resolveMayWriteBody(true) }
        }
        self.lastInbound = .now()
        self.armIdleTimer()
        self.readIfNeeded()
        return handle
    }

    private func makeBodyProducer(
        id: UInt64,
        bodyHandler: NIOLoopBound<HTTPLinkHandler>
    )
        -> NIOThrowingAsyncSequenceProducer<
            ByteBuffer, any Error, NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark, ResponseBodyDelegate
        >.NewSequence
    {
        // Counted in reads, each at most `maximumReadSize`, so the bytes waiting for a slow
        // consumer stay within `responseBufferSize` (plus the one read in flight).
        let highWatermark = max(2, self.configuration.responseBufferSize / Self.maximumReadSize)
        return ResponseBodyProducer.makeSequence(
            elementType: ByteBuffer.self,
            backPressureStrategy: .init(lowWatermark: max(1, highWatermark / 4), highWatermark: highWatermark),
            finishOnDeinit: false,
            delegate: ResponseBodyDelegate(handler: bodyHandler, eventLoop: self.eventLoop, id: id)
        )
    }

    /// Hands the body of exchange `id` to its consumer: the whole body when it has already
    /// arrived, else a stream that starts with what has arrived so far.
    func claimBody(
        _ pending: PendingResponseBody,
        id: UInt64,
        bodyHandler: NIOLoopBound<HTTPLinkHandler>
    ) -> HTTPResponseBody {
        if pending.ended && pending.failure == nil {
            return HTTPResponseBody(buffered: pending.buffer)
        }
        let producer = self.makeBodyProducer(id: id, bodyHandler: bodyHandler)
        var wantsMore = true
        if let buffer = pending.buffer, buffer.readableBytes > 0 {
            wantsMore = producer.source.yield(buffer) != .stopProducing
        }
        pending.buffer = nil
        if let failure = pending.failure {
            producer.source.finish(failure)
        } else if self.ports?.id == id, self.ports?.pending === pending {
            self.ports?.pending = nil
            self.ports?.source = producer.source
            self.ports?.consumerWantsMore = wantsMore
            self.readIfNeeded()
        } else {
            producer.source.finish(self.failure ?? HTTPLinkError(.linkClosed, "the link closed during the response"))
        }
        return HTTPResponseBody(producer: producer.sequence)
    }

    /// Ends the body of the exchange in progress, with `error` or (`nil`) normally.
    private func finishBody(_ error: HTTPLinkError?) {
        if let error {
            self.ports?.source?.finish(error)
            self.ports?.pending?.fail(error)
        } else {
            self.ports?.source?.finish()
            self.ports?.pending?.ended = true
        }
        self.ports?.source = nil
        self.ports?.pending = nil
    }

    /// Writes one part of a streamed request body. The future completes when the link can take
    /// more (back-pressure), so a fast producer never fills memory.
    func writeBody(id: UInt64, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        guard let context = self.context, self.ports?.id == id, self.failure == nil else {
            return self.eventLoopFailure(
                self.failure ?? HTTPLinkError(.linkClosed, "the link closed while the request body was being sent")
            )
        }
        self.configuration.tracer?.emit(.requestBody(buffer))
        // A failed write surfaces through errorCaught/channelInactive, which fail the exchange.
        context.writeAndFlush(self.wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        if context.channel.isWritable {
            return context.eventLoop.makeSucceededVoidFuture()
        }
        let writable = context.eventLoop.makePromise(of: Void.self)
        self.writabilityWaiters.append(writable)
        return writable.futureResult
    }

    func endRequest(id: UInt64) {
        guard let context = self.context, self.ports?.id == id, self.failure == nil else { return }
        context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
        self.apply(self.machine.requestEnded(id: id))
    }

    /// The caller's body source failed: the request on the wire is incomplete, so the link
    /// cannot be trusted again.
    func failRequest(id: UInt64, _ error: HTTPLinkError) {
        guard self.ports?.id == id else { return }
        self.fail(error)
    }

    func consumerWantsMore(id: UInt64) {
        guard self.ports?.id == id else { return }
        self.ports?.consumerWantsMore = true
        self.readIfNeeded()
    }

    /// The caller is done with the response (finished, threw, or was cancelled). Whatever is
    /// left of the body is drained so the next exchange starts in step.
    func consumerGone(id: UInt64) {
        guard self.ports?.id == id else { return }
        switch self.machine.consumerGone(id: id) {
        case .none:
            break
        case .startDraining:
            self.startDraining()
        }
    }

    /// The caller's task was cancelled: fail what it waits on, and drain what the device still
    /// sends for this exchange so the link stays in step.
    func cancel(id: UInt64) {
        guard self.ports?.id == id else { return }
        let error = HTTPLinkError(.cancelled, "the request was cancelled")
        if self.closesAbandonedStreams {
            // Not even the head is awaited: the next request goes out on a fresh stream.
            self.configuration.tracer?.emit(.note("cancelled: closing this stream; the next request opens a fresh one"))
            self.fail(error)
            return
        }
        self.ports?.head?.fail(error)
        self.ports?.head = nil
        self.finishBody(error)
        self.consumerGone(id: id)
    }

    func exchangeTimedOut(id: UInt64) {
        guard self.ports?.id == id else { return }
        let error = HTTPLinkError(.exchangeTimeout, "the exchange took longer than its timeout")
        switch self.machine.exchangeTimedOut(id: id) {
        case .none:
            break
        case .failConsumerAndDrain:
            self.finishBody(error)
            self.startDraining()
        case .failAndClose:
            self.fail(error)
        }
    }

    /// Closes the link (the owner is shutting down or giving up on it).
    func close(reason: HTTPLinkError) {
        self.fail(reason)
    }

    // MARK: Inbound parts

    private func received(head: HTTPResponseHead) {
        self.configuration.tracer?.emit(.responseHead(Self.render(head)))
        let status = Int(head.status.code)
        if status == 101 {
            self.fail(
                HTTPLinkError(.malformedResponse, "the device switched protocols (101) though no upgrade was asked for")
            )
            return
        }
        let selfDelimited = Self.isSelfDelimited(head, isHeadRequest: self.isHeadRequest)
        switch self.machine.responseHead(status: status, keepAlive: head.isKeepAlive, selfDelimited: selfDelimited) {
        case .ignore:
            self.guardHandler.mode = .startLine(seen: 0)
        case .releaseRequestBody:
            self.guardHandler.mode = .startLine(seen: 0)
            self.releaseRequestBody()
        case .protocolViolation:
            self.fail(
                HTTPLinkError(.strayBytes, "the device sent a response while none was due; the link was out of step")
            )
        case .deliver(let bodyAbandoned), .drain(let bodyAbandoned):
            // The final head is in: what follows is its body, never a status line (a 1xx
            // decoded from the same read set the guard back to `.startLine`).
            self.guardHandler.mode = .passThrough
            if bodyAbandoned { self.resolveMayWriteBody(false) }
            let response: HTTPResponse
            do {
                response = try HTTPResponse(head)
            } catch {
                self.fail(
                    HTTPLinkError(
                        .malformedResponse,
                        "the device sent an invalid status line (\(head.status.code))",
                        underlying: error
                    )
                )
                return
            }
            self.ports?.head?.succeed(response)
            self.ports?.head = nil
        }
    }

    private func received(body: ByteBuffer) {
        switch self.machine.responseBody(byteCount: body.readableBytes) {
        case .deliver:
            self.configuration.tracer?.emit(.responseBody(body))
            if let source = self.ports?.source {
                if source.yield(body) == .stopProducing { self.ports?.consumerWantsMore = false }
            } else if let pending = self.ports?.pending {
                pending.append(body)
                // Not claimed yet: gather no more than a slow stream consumer would buffer.
                if pending.byteCount >= self.configuration.responseBufferSize { self.ports?.consumerWantsMore = false }
            }
        case .discard:
            break
        case .drainLimitExceeded:
            self.configuration.tracer?.emit(
                .note(
                    "abandoned response exceeds the drain limit (\(self.configuration.drainLimit) bytes); tearing the link down"
                )
            )
            self.fail(HTTPLinkError(.cancelled, "the response was abandoned and was too large to drain"))
        case .protocolViolation:
            self.fail(
                HTTPLinkError(.strayBytes, "the device sent body bytes while none were due; the link was out of step")
            )
        }
    }

    private func receivedEnd() {
        let action = self.machine.responseEnded()
        if action == .protocolViolation {
            self.fail(
                HTTPLinkError(.strayBytes, "the device ended a response while none was due; the link was out of step")
            )
            return
        }
        if action.finishBody {
            self.finishBody(nil)
        }
        self.apply(action.completion)
    }

    // MARK: Helpers

    private var isHeadRequest: Bool {
        if case .exchange(let exchange) = self.machine.state { return exchange.isHeadRequest }
        return false
    }

    private func apply(_ completion: LinkStateMachine.CompletionAction) {
        guard case .complete(let reusable) = completion, var ports = self.ports else { return }
        for timer in ports.timers { timer.cancel() }
        ports.timers.removeAll()
        // A drained body's source was never finished; NIO traps if it is dropped unfinished.
        ports.source?.finish()
        ports.source = nil
        ports.pending?.fail(HTTPLinkError(.cancelled, "the response was abandoned"))
        self.ports = nil
        // The idle timer is left to run out: it does nothing while no exchange is in progress,
        // and the next exchange re-uses it (scheduling and cancelling one per exchange costs
        // more than the check).
        if reusable {
            self.guardHandler.mode = .idle
            self.readIfNeeded()
        } else {
            self.failure = HTTPLinkError(.linkClosed, "the previous response closed the link")
            self.context?.close(promise: nil)
        }
        ports.completion?.succeed(reusable)
    }

    private func startDraining() {
        guard let context = self.context else { return }
        if self.closesAbandonedStreams {
            // Waiting for the rest would hold up the next request for nothing: a fresh stream
            // costs an open, the rest of this response could take any time.
            self.configuration.tracer?.emit(
                .note("abandoned response: closing this stream; the next request opens a fresh one")
            )
            self.fail(HTTPLinkError(.cancelled, "the response was abandoned; its stream was closed, not drained"))
            return
        }
        self.configuration.tracer?.emit(.note("draining the rest of an abandoned response"))
        self.ports?.consumerWantsMore = true
        let id = self.ports?.id
        let timer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(self.configuration.drainTimeout)) {
            guard self.ports?.id == id else { return }
            self.configuration.tracer?.emit(.note("draining took too long; tearing the link down"))
            self.fail(HTTPLinkError(.cancelled, "the abandoned response could not be drained in time"))
        }
        self.ports?.timers.append(timer)
        self.readIfNeeded()
    }

    /// The request body may go: a held in-memory body is written and the request ended here; a
    /// streamed one is written by the async side once `mayWriteBody` resolves.
    private func releaseRequestBody() {
        self.resolveMayWriteBody(true)
        guard let context = self.context, let id = self.ports?.id, let buffer = self.ports?.heldBody else { return }
        self.ports?.heldBody = nil
        if buffer.readableBytes > 0 {
            self.configuration.tracer?.emit(.requestBody(buffer))
            context.write(self.wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
        context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
        self.apply(self.machine.requestEnded(id: id))
    }

    private func resolveMayWriteBody(_ value: Bool) {
        self.ports?.mayWriteBody?.succeed(value)
        self.ports?.mayWriteBody = nil
    }

    private var wantsBytes: Bool {
        guard self.isActive else { return false }
        if self.settling != nil { return true }
        switch self.machine.state {
        case .idle:
            return true  // to notice stray bytes and the device closing the link
        case .broken:
            return false
        case .exchange(let exchange):
            if case .body = exchange.response { return self.ports?.consumerWantsMore ?? false }
            return true
        }
    }

    private func readIfNeeded() {
        guard !self.readPending, self.wantsBytes, let context = self.context else { return }
        self.readPending = true
        context.read()
    }

    /// One timer per exchange: when it fires it checks how long the device has been silent while
    /// bytes were wanted, and re-arms itself. It looks at least once per `period`: a look that
    /// comes much later than planned means the event loop itself was held up (a consumer on the
    /// link's executor that blocked, say), and bytes the device sent meanwhile could not be
    /// read, so that time is not counted as the device's silence.
    private func armIdleTimer() {
        guard let context = self.context, self.idleTimer == nil else { return }
        let idle = TimeAmount(self.configuration.idleTimeout)
        let period = min(idle, .seconds(1))
        func schedule(_ planned: NIODeadline) {
            self.idleTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: planned) { check(planned) }
        }
        func check(_ planned: NIODeadline) {
            self.idleTimer = nil
            guard self.ports != nil else { return }
            let now = NIODeadline.now()
            let loopWasHeldUp = now - planned > period
            let waitingOnDevice = self.readPending && self.wantsBytes
            if waitingOnDevice && !loopWasHeldUp && now - self.lastInbound >= idle {
                self.fail(
                    HTTPLinkError(
                        .idleTimeout,
                        "the device sent nothing for \(self.configuration.idleTimeout) while a response was due"
                    )
                )
                return
            }
            if !waitingOnDevice || loopWasHeldUp { self.lastInbound = now }
            schedule(min(self.lastInbound + idle, now + period))
        }
        schedule(min(self.lastInbound + idle, .now() + period))
    }

    /// Fails whatever is in progress and closes the link. Safe to call more than once.
    private func fail(_ error: HTTPLinkError) {
        if self.failure == nil { self.failure = error }
        _ = self.machine.linkFailed()
        self.guardHandler.mode = .discard
        self.idleTimer?.cancel()
        self.idleTimer = nil
        self.settleTimer?.cancel()
        self.settling?.fail(error)
        self.settling = nil
        let waiters = self.writabilityWaiters
        self.writabilityWaiters.removeAll()
        for waiter in waiters { waiter.fail(error) }
        if var ports = self.ports {
            self.ports = nil
            for timer in ports.timers { timer.cancel() }
            ports.timers.removeAll()
            ports.head?.fail(error)
            ports.mayWriteBody?.succeed(false)
            ports.source?.finish(error)
            ports.pending?.fail(error)
            ports.completion?.succeed(false)
        }
        if self.isActive { self.context?.close(promise: nil) }
    }

    private func eventLoopFailure<T>(_ error: HTTPLinkError) -> EventLoopFuture<T> {
        self.eventLoop.makeFailedFuture(error)
    }
}
