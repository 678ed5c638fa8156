import AccessoryTransport
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// The last handler of a client link's pipeline: feeds what happens on the channel and what
/// the caller does into the ``LinkStateMachine`` and carries out the actions it returns —
/// writing the request, handing the response to the caller (the body with back-pressure,
/// through a ``ResponseBodySink``), reading from the device when the machine wants bytes,
/// setting the link guard's mode, and running the timers.
///
/// Everything here runs on the channel's event loop. The async side reaches it through
/// `NIOLoopBound` and the exchange's futures.
final class HTTPLinkHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    /// The largest single read from the device (the receive allocator's maximum).
    static let maximumReadSize = 256 * 1024

    var machine: LinkStateMachine
    var ports: ExchangePorts?
    var context: ChannelHandlerContext?
    let guardHandler: LinkGuardHandler
    let configuration: LinkConfiguration
    let eventLoop: any EventLoop
    private var readPending = false
    private var isActive = false
    private var idleWatch: IdleWatch
    private var idleTimer: Scheduled<Void>?
    /// Why the link broke, for the exchange that asks next.
    private(set) var failure: HTTPLinkError?
    /// How the current response's end is found on the wire (set by its final head).
    private var responseEnd: LinkGuardHandler.ResponseEnd?

    /// - Parameter closesAbandonedStreams: close the stream of an abandoned response instead of
    ///   draining it (see ``LinkStateMachine/Policy``).
    init(
        configuration: LinkConfiguration,
        guardHandler: LinkGuardHandler,
        eventLoop: any EventLoop,
        closesAbandonedStreams: Bool = false
    ) {
        self.eventLoop = eventLoop
        self.configuration = configuration
        self.guardHandler = guardHandler
        self.machine = LinkStateMachine(
            policy: .init(
                drainLimit: configuration.drainLimit,
                closesAbandonedStreams: closesAbandonedStreams
            )
        )
        self.idleWatch = IdleWatch(idleTimeout: TimeAmount(configuration.idleTimeout), now: eventLoop.now)
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
        self.readIfWanted()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.isActive = false
        self.fail(HTTPLinkError(.linkClosed, "the device closed the link before the response was complete"))
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.idleWatch.inputArrived(now: self.eventLoop.now)
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.configuration.tracer?.emit(.responseHead(Self.render(head)))
            if head.status.code >= 200 {
                self.responseEnd = Self.responseEnd(head, isHeadRequest: self.machine.isHeadRequest)
            }
            let action = self.machine.responseHead(
                status: Int(head.status.code),
                keepAlive: head.isKeepAlive,
                selfDelimited: Self.isSelfDelimited(head, isHeadRequest: self.machine.isHeadRequest),
                framingProblem: Self.framingProblem(head)
            )
            self.run(action, head: head)
        case .body(let buffer):
            self.run(self.machine.responseBody(byteCount: buffer.readableBytes), body: buffer)
        case .end(let trailers):
            if let trailers, !trailers.isEmpty {
                self.configuration.tracer?.emit(.note("trailer fields: \(Self.render(trailers))"))
                self.ports?.trailers.record(HTTPFields(trailers, splitCookie: false))
            }
            let overran = self.responseEnd.map { self.guardHandler.wentBeyondEnd(of: $0) } ?? false
            self.responseEnd = nil
            if overran {
                self.configuration.tracer?.emit(
                    .note("the device sent bytes after the end of the response; the link will be reopened")
                )
            }
            let steers = Self.steersTheConnection(trailers)
            if steers {
                self.configuration.tracer?.emit(.note("trailer fields steer the connection; the link will be reopened"))
            }
            self.run(self.machine.responseEnded(bytesFollowed: overran, connectionFieldsInTrailers: steers))
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.readPending = false
        self.readIfWanted()
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if Self.hadNothingToDecode(error, bodiless: self.machine.responseIsBodiless) { return }
        self.fail(Self.linkError(for: error, responseStart: self.guardHandler.responseStart))
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { self.ports?.becameWritable() }
        context.fireChannelWritabilityChanged()
    }

    // MARK: Calls from the async side (on the event loop)

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
        var expectsContinue = false
        if case .none = body {} else { expectsContinue = Self.expectsContinue(head) }
        guard self.machine.startExchange(id: id, isHeadRequest: head.method == .HEAD, expectsContinue: expectsContinue)
        else {
            throw HTTPLinkError(.invalidRequest, "an exchange is already in progress on this link")
        }
        let loop = context.eventLoop.assumeIsolated()
        var streamed = false
        if case .streamed = body { streamed = true }
        var (ports, handle) = ExchangePorts.open(
            id: id,
            on: self.eventLoop,
            streamedRequestBody: streamed,
            pendingResponseBody: pendingBody ? self.configuration.responseBufferSize : nil,
            makeProducer: { self.makeProducer(id: id, bodyHandler: bodyHandler) }
        )
        if let deadline {
            ports.timers.append(
                loop.scheduleTask(deadline: deadline) { self.run(self.machine.exchangeTimedOut(id: id)) }
            )
        }
        if expectsContinue {
            ports.timers.append(
                loop.scheduleTask(in: TimeAmount(self.configuration.expectContinueTimeout)) {
                    if self.machine.continueTimedOut(id: id) { self.releaseRequestBody() }
                }
            )
        }
        self.ports = ports
        self.guardHandler.startResponse()
        self.configuration.tracer?.emit(.requestHead(Self.render(head)))

        context.write(self.wrapOutboundOut(.head(head)), promise: nil)
        switch body {
        case .none:
            self.writeEnd(id: id, body: nil)
        case .complete(let buffer) where !expectsContinue:
            self.writeEnd(id: id, body: buffer)
        case .complete(let buffer):
            // Held back until the device says `100 Continue` (or the continue timeout passes).
            self.ports?.heldBody = buffer
            context.flush()
        case .streamed:
            context.flush()
            if !expectsContinue { self.ports?.resolveMayWriteBody(true) }
        }
        self.idleWatch.inputArrived(now: self.eventLoop.now)
        self.armIdleTimer()
        self.readIfWanted()
        return handle
    }

    // MARK: Carrying out the machine's actions

    func run(_ action: LinkStateMachine.Action, head: HTTPResponseHead? = nil, body: ByteBuffer? = nil) {
        switch action {
        case .none:
            break
        case .read:
            self.readIfWanted()
        case .awaitFinalHead(let releaseRequestBody):
            self.guardHandler.awaitAnotherHead()
            if releaseRequestBody { self.releaseRequestBody() }
        case .forwardHead(let deliver, let requestBodyAbandoned):
            // What follows is this head's body, never a status line (a 1xx decoded from the
            // same read set the guard back to `.startLine`).
            self.guardHandler.mode = .passThrough
            if requestBodyAbandoned, self.ports?.requestBodyAbandonment.isRecorded == false {
                self.configuration.tracer?.emit(
                    .note("the device answered before the request body was complete; the rest is not sent")
                )
                self.ports?.abandonRequestBody()
            }
            guard deliver, let head else { break }
            do {
                self.ports?.deliverHead(try HTTPResponse(head))
            } catch {
                let message = "the device sent an invalid status line (\(head.status.code))"
                self.fail(HTTPLinkError(.malformedResponse, message, underlying: error))
            }
        case .forwardBody:
            guard let body, let ports = self.ports else { break }
            self.configuration.tracer?.emit(.responseBody(body))
            if !ports.body.deliver(body) { _ = self.machine.consumerDemand(id: ports.id, wantsMore: false) }
        case .endResponse(let finishBody, let completion):
            // The outcome first: a consumer that sees the body end may ask for the link at once.
            if case .complete(let reusable) = completion { self.ports?.outcome.record(reusable: reusable) }
            if finishBody { self.ports?.body.finish(nil) }
            if case .complete(let reusable) = completion { self.complete(reusable: reusable) }
        case .complete(let reusable):
            self.complete(reusable: reusable)
        case .failCaller(let error, let thenDrain):
            self.ports?.failCaller(error)
            if thenDrain { self.startDraining() }
        case .drain:
            self.startDraining()
        case .close(let error, let note):
            if let note { self.configuration.tracer?.emit(.note(note)) }
            self.fail(error)
        }
    }

    private func complete(reusable: Bool) {
        guard var ports = self.ports else { return }
        self.ports = nil
        // The idle timer is left to run out: it does nothing while no exchange is in progress.
        if reusable {
            self.guardHandler.mode = .idle
            self.readIfWanted()
        } else {
            self.failure = HTTPLinkError(.linkClosed, "the previous response closed the link")
            self.giveUpStream()
        }
        ports.complete(reusable: reusable)
    }

    private func startDraining() {
        guard let id = self.ports?.id else { return }
        self.configuration.tracer?.emit(.note("draining the rest of an abandoned response"))
        let timer = self.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(self.configuration.drainTimeout)) {
            self.run(self.machine.drainTimedOut(id: id))
        }
        self.ports?.timers.append(timer)
        self.readIfWanted()
    }

    /// Writes the end of the request (after `body`, if any) and tells the machine.
    func writeEnd(id: UInt64, body: ByteBuffer?, trailers: HTTPFields? = nil) {
        guard let context = self.context else { return }
        if var body, body.readableBytes > 0 {
            self.configuration.tracer?.emit(.requestBody(body))
            // A large body goes in slices, each of which restarts the idle bound as it leaves:
            // a response is not due while the device is still taking the body, however slowly.
            let sliced = body.readableBytes > Self.progressSlice
            while body.readableBytes > Self.progressSlice, let slice = body.readSlice(length: Self.progressSlice) {
                context.write(self.wrapOutboundOut(.body(.byteBuffer(slice))), promise: self.progressPromise())
            }
            context.write(
                self.wrapOutboundOut(.body(.byteBuffer(body))),
                promise: sliced ? self.progressPromise() : nil
            )
        }
        let trailerHeaders = trailers.map { HTTPHeaders($0) }
        if let trailerHeaders {
            self.configuration.tracer?.emit(.note("trailer fields: \(Self.render(trailerHeaders))"))
        }
        context.writeAndFlush(self.wrapOutboundOut(.end(trailerHeaders)), promise: nil)
        self.run(self.machine.requestEnded(id: id))
    }

    /// Request body bytes per write whose completion restarts the idle bound.
    static let progressSlice = 256 << 10

    /// A write promise that, once the write reached the line, restarts the idle bound.
    func progressPromise() -> EventLoopPromise<Void> {
        let promise = self.eventLoop.makePromise(of: Void.self)
        promise.futureResult.assumeIsolated().whenSuccess {
            self.idleWatch.requestBytesTaken(now: self.eventLoop.now)
        }
        return promise
    }

    /// The request body may go: a held in-memory body is written and the request ended here; a
    /// streamed one is written by the async side once `mayWriteBody` resolves.
    private func releaseRequestBody() {
        self.ports?.resolveMayWriteBody(true)
        guard let id = self.ports?.id, let buffer = self.ports?.heldBody else { return }
        self.ports?.heldBody = nil
        self.writeEnd(id: id, body: buffer)
    }

    func makeProducer(id: UInt64, bodyHandler: NIOLoopBound<HTTPLinkHandler>)
        -> ResponseBodyProducer.NewSequence
    {
        ResponseBodySink.makeProducer(
            bufferSize: self.configuration.responseBufferSize,
            delegate: ResponseBodyDelegate(handler: bodyHandler, eventLoop: self.eventLoop, id: id)
        )
    }

    private func readIfWanted() {
        guard self.isActive, !self.readPending, self.machine.wantsBytes, let context = self.context else { return }
        self.readPending = true
        context.read()
    }

    /// One idle watch per link, looking at least once per period (see ``IdleWatch``).
    private func armIdleTimer() {
        guard self.idleTimer == nil else { return }
        func schedule(_ planned: NIODeadline) {
            self.idleTimer = self.eventLoop.assumeIsolated().scheduleTask(deadline: planned) {
                self.idleTimer = nil
                guard self.ports != nil else { return }
                let waiting = self.readPending && self.machine.wantsBytes
                switch self.idleWatch.look(planned: planned, now: self.eventLoop.now, waitingOnDevice: waiting) {
                case .timedOut:
                    let message =
                        "the device sent nothing for \(self.configuration.idleTimeout) while a response was due"
                    self.fail(HTTPLinkError(.idleTimeout, message))
                case .lookAgainAt(let next):
                    schedule(next)
                }
            }
        }
        schedule(self.idleWatch.firstLook(now: self.eventLoop.now))
    }

    /// Fails whatever is in progress and closes the link. Safe to call more than once.
    func fail(_ error: HTTPLinkError) {
        if self.failure == nil { self.failure = error }
        let wasAnswered = self.machine.linkFailed(byDevice: error.code == .linkClosed)
        self.guardHandler.mode = .discard
        self.idleTimer?.cancel()
        self.idleTimer = nil
        if var ports = self.ports {
            self.ports = nil
            if wasAnswered {
                self.configuration.tracer?.emit(
                    .note("the link ended after the whole answer, while the request body was still going out")
                )
                ports.abandonRequestBody()
                ports.complete(reusable: false)
            } else {
                ports.fail(error, answered: self.guardHandler.responseStart.readableBytes > 0)
            }
        }
        if self.isActive { self.giveUpStream() }
    }

    /// Ends this stream: a session layer below ends just the session and keeps the transport
    /// open for the next one (``ByteStreamEndRequest``); without one, the channel closes.
    private func giveUpStream() {
        guard let context = self.context else { return }
        let ended = context.eventLoop.makePromise(of: Void.self)
        context.triggerUserOutboundEvent(ByteStreamEndRequest(), promise: ended)
        ended.futureResult.assumeIsolated().whenFailure { _ in context.close(promise: nil) }
    }
}
