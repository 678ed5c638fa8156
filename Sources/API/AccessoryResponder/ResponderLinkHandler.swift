import AccessoryHTTP2
import AccessorySession
import HTTPTypes
import NIOCore
import NIOHTTP2
import NIOHTTPTypes

/// The responder's side of one link, as the link's task sees it: the next request part, and
/// response parts written in order with back-pressure.
///
/// It does what `NIOAsyncChannel` would, for exactly one reader and one writer at a time, with a
/// fast path for a task that runs on the link's event loop (the default, see
/// ``ResponderConfiguration/runsHandlersOnEventLoop``): a part already queued is returned, and a
/// response written, without any suspension or hand-off at all. Profiles put `NIOAsyncChannel`'s
/// general machinery (its producer and writer state machines, locks and continuations) at about
/// a sixth of the responder's time per small request. Tasks elsewhere (a handler that reads its
/// body from another task, or handlers configured off the event loop) take the same paths
/// through one event-loop hop.
struct ResponderLink: Sendable {
    let channel: any Channel
    private let handler: NIOLoopBound<ResponderLinkHandler>

    init(channel: any Channel, handler: ResponderLinkHandler) {
        self.channel = channel
        self.handler = NIOLoopBound(handler, eventLoop: channel.eventLoop)
    }

    var eventLoop: any EventLoop { self.channel.eventLoop }

    /// The next request part; `nil` once the peer has closed its side of the link.
    /// Only one task may wait at a time (``LinkInbound`` sees to that).
    func next() async throws -> HTTPRequestPart? {
        try Task.checkCancellation()
        let (handler, eventLoop) = (self.handler, self.eventLoop)
        if eventLoop.inEventLoop {
            switch handler.value.takePart() {
            case .part(let part): return part
            case .end: return nil
            case .failed(let error): throw error
            case .empty: break
            }
        }
        // A task cancelled while it waits (the responder is stopping) stops waiting.
        return try await withTaskCancellationHandler {
            guard eventLoop.inEventLoop else {
                return try await eventLoop.flatSubmit { handler.value.nextPart() }.get()
            }
            return try await withCheckedThrowingContinuation { continuation in
                // Still on the event loop: nothing can arrive between `takePart` and this.
                handler.value.wait(.continuation(continuation))
            }
        } onCancel: {
            eventLoop.execute { handler.value.cancelWaiters() }
        }
    }

    /// Writes `parts` and flushes; returns once the link can take more.
    func write(contentsOf parts: some Sequence<HTTPResponsePart> & Sendable) async throws {
        try Task.checkCancellation()
        let (handler, eventLoop) = (self.handler, self.eventLoop)
        if eventLoop.inEventLoop {
            guard try !handler.value.write(parts) else { return }
        }
        try await withTaskCancellationHandler {
            guard eventLoop.inEventLoop else {
                try await eventLoop.flatSubmit { handler.value.writeThenWaitForWritability(parts) }.get()
                return
            }
            try await withCheckedThrowingContinuation { continuation in
                handler.value.waitForWritability(.continuation(continuation))
            }
        } onCancel: {
            eventLoop.execute { handler.value.cancelWaiters() }
        }
    }

    func write(_ part: HTTPResponsePart) async throws {
        try await self.write(contentsOf: CollectionOfOne(part))
    }

    /// On an HTTP/2 stream whose answer went out whole: RST_STREAM NO_ERROR, the host's cue to
    /// stop sending the request body without an error (RFC 9113 §8.1; see
    /// ``ResponderLinkHandler/resetAfterCompleteAnswer()``).
    func resetAfterCompleteAnswer() {
        let handler = self.handler
        if self.eventLoop.inEventLoop {
            handler.value.resetAfterCompleteAnswer()
        } else {
            self.eventLoop.execute { handler.value.resetAfterCompleteAnswer() }
        }
    }

    /// Closes the link and waits until it is closed.
    func close() async {
        try? await self.channel.close()
    }
}

/// The event-loop half of ``ResponderLink``: queues decoded request parts until the link's task
/// asks for them (reading from the peer only while fewer than `highWatermark` parts and
/// `highWatermarkBytes` body bytes wait), and writes its response parts.
final class ResponderLinkHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// Request parts queued before reading from the peer stops (a body the handler is not
    /// reading yet holds the peer back instead of filling memory).
    static let highWatermark = 8
    /// Body bytes queued before reading from the peer stops. Bounded in bytes too, since one
    /// part can be a whole read (tens of KiB): a host sees the device take its upload as the
    /// handler reads it, not in bursts seconds apart, and a session host's PING behind the
    /// upload is read, and answered, within a fraction of a second (docs/framing.md §4).
    static let highWatermarkBytes = 64 * 1024

    enum Taken {
        case part(HTTPRequestPart)
        case empty
        case end
        case failed(any Error)
    }

    enum Waiter<Value: Sendable> {
        case continuation(CheckedContinuation<Value, any Error>)
        case promise(EventLoopPromise<Value>)

        func resume(with result: Result<Value, any Error>) {
            switch self {
            case .continuation(let continuation): continuation.resume(with: result)
            case .promise(let promise): promise.completeWith(result)
            }
        }
    }

    private let eventLoop: any EventLoop
    private var context: ChannelHandlerContext?
    private var queue = CircularBuffer<HTTPRequestPart>(initialCapacity: 4)
    /// Body bytes in `queue`.
    private var queuedBytes = 0
    /// Set once the peer closed its side (`.success`) or the inbound side failed.
    private var inboundEnd: Result<Void, any Error>?
    private var partWaiter: Waiter<HTTPRequestPart?>?
    private var writabilityWaiters: [Waiter<Void>] = []
    private var readHeldBack = false
    /// The session layer ended the stream this handler serves.
    private var streamEnded = false

    /// On an HTTP/2 stream: the answer's last write, once written (``resetAfterCompleteAnswer()``).
    private var answerWritten: EventLoopFuture<Void>?
    private let http2Stream: Bool

    /// - Parameter http2Stream: the handler serves an HTTP/2 stream channel. Otherwise it serves
    ///   a link on a socket or pipe channel of its own, and sets NIO's reads per readiness event
    ///   on it (see ``askForMore(context:)``; NIO traps on that option on a stream channel).
    init(eventLoop: any EventLoop, http2Stream: Bool) {
        self.eventLoop = eventLoop
        self.http2Stream = http2Stream
        self.readsPerEvent = http2Stream ? nil : Self.readsPerEventKeepingUp
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        self.endInbound(.success(()))
        self.failWritabilityWaiters()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = self.unwrapInboundIn(data)
        if let waiter = self.partWaiter {
            self.partWaiter = nil
            waiter.resume(with: .success(part))
        } else {
            self.queue.append(part)
            if case .body(let buffer) = part { self.queuedBytes += buffer.readableBytes }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.endInbound(.failure(error))
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .inputClosed = event as? ChannelEvent {
            self.endInbound(.success(()))
        }
        if event is SessionStreamEnded {
            // The session layer ended this stream (a new HELLO, the host's CLOSE): the exchange
            // in progress stops, nothing more is written for it.
            self.streamEnded = true
            self.endInbound(.success(()))
            self.failWritabilityWaiters()
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.endInbound(.success(()))
        self.failWritabilityWaiters()
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { self.resumeWritabilityWaiters(.success(())) }
        context.fireChannelWritabilityChanged()
    }

    /// Reads from the peer only while the queue has room.
    func read(context: ChannelHandlerContext) {
        if self.queue.count < Self.highWatermark && self.queuedBytes < Self.highWatermarkBytes {
            self.askForMore(context: context)
        } else {
            self.readHeldBack = true
        }
    }

    /// NIO's reads per readiness event while the handler keeps up (its default).
    static let readsPerEventKeepingUp: UInt = 4
    /// The reads per event last set; `nil` on a channel whose reads are not its own to tune (an
    /// HTTP/2 stream's, which traps on the option), or that refused the option.
    private var readsPerEvent: UInt?

    /// Asks the peer for bytes: NIO's four reads per readiness event while the handler keeps up,
    /// one while body bytes wait for it. The parts a read brings are queued whether or not the
    /// handler wants them, so four reads (up to 256 KiB) ahead of a handler that takes an upload
    /// slowly would hold it for seconds, while the host sees its line stand still and takes the
    /// device for a dead one (docs/framing.md §4). Always one read costs about 8 % of a fast
    /// upload over pipes (measured), so it is one only while the handler lags.
    private func askForMore(context: ChannelHandlerContext) {
        let wanted: UInt = self.queuedBytes > 0 ? 1 : Self.readsPerEventKeepingUp
        if let current = self.readsPerEvent, current != wanted {
            do {
                try context.channel.syncOptions?.setOption(ChannelOptions.maxMessagesPerRead, value: wanted)
                self.readsPerEvent = wanted
            } catch {
                self.readsPerEvent = nil
            }
        }
        context.read()
    }

    // MARK: The link's task (always on the event loop)

    func takePart() -> Taken {
        if let part = self.queue.popFirst() {
            if case .body(let buffer) = part { self.queuedBytes -= buffer.readableBytes }
            if self.readHeldBack && self.queue.count < Self.highWatermark / 2
                && self.queuedBytes < Self.highWatermarkBytes / 2
            {
                self.readHeldBack = false
                if let context = self.context { self.askForMore(context: context) }
            }
            return .part(part)
        }
        switch self.inboundEnd {
        case .none: return .empty
        case .success: return .end
        case .failure(let error): return .failed(error)
        }
    }

    func wait(_ waiter: Waiter<HTTPRequestPart?>) {
        guard self.partWaiter == nil else {
            waiter.resume(with: .failure(ResponderError(.bodyUnavailable, "the link is already being read")))
            return
        }
        self.partWaiter = waiter
        if self.readHeldBack {
            self.readHeldBack = false
            if let context = self.context { self.askForMore(context: context) }
        }
    }

    /// ``takePart()`` and ``wait(_:)`` for a task off the event loop.
    func nextPart() -> EventLoopFuture<HTTPRequestPart?> {
        let eventLoop = self.eventLoop
        switch self.takePart() {
        case .part(let part): return eventLoop.makeSucceededFuture(part)
        case .end: return eventLoop.makeSucceededFuture(nil)
        case .failed(let error): return eventLoop.makeFailedFuture(error)
        case .empty:
            let promise = eventLoop.makePromise(of: HTTPRequestPart?.self)
            self.wait(.promise(promise))
            return promise.futureResult
        }
    }

    /// Writes and flushes `parts`; returns whether the link can take more right away.
    func write(_ parts: some Sequence<HTTPResponsePart>) throws -> Bool {
        guard let context = self.context, context.channel.isActive, !self.streamEnded else {
            throw ResponderError(.connectionClosed, "the link closed before the response could be sent")
        }
        for part in parts {
            guard self.http2Stream, case .end = part else {
                context.write(self.wrapOutboundOut(part), promise: nil)
                continue
            }
            let written = context.eventLoop.makePromise(of: Void.self)
            self.answerWritten = written.futureResult
            context.write(self.wrapOutboundOut(part), promise: written)
        }
        context.flush()
        return context.channel.isWritable
    }

    /// RST_STREAM NO_ERROR on this HTTP/2 stream once its answer went out whole, if the host
    /// is still sending the request body: its cue to stop without an error (RFC 9113 §8.1).
    /// Written below the HTTP-types codec, where the stream channel takes frame payloads, and
    /// only after the answer's last frame was written: NIOHTTP2Handler drops a stream's frames
    /// still waiting in its buffer when the stream is reset, and the host would get a cut-off
    /// answer. Nothing waits for it: an answer held back by the host's flow control (a host
    /// that went away) must not hold the stream's task, which the next session waits for.
    func resetAfterCompleteAnswer() {
        // The request's end already arrived (a GET's END_STREAM on its HEADERS, a body the
        // handler did not read but that came whole): nothing to stop.
        guard self.inboundEnd == nil, !self.queue.contains(where: { if case .end = $0 { true } else { false } })
        else { return }
        guard let answerWritten = self.answerWritten, let context = self.context else { return }
        let pipeline = context.pipeline
        answerWritten.assumeIsolated().whenSuccess {
            guard let below = try? pipeline.syncOperations.context(handlerType: EndStreamCoalescer.self) else { return }
            below.writeAndFlush(NIOAny(HTTP2Frame.FramePayload.rstStream(.noError)), promise: nil)
        }
    }

    func waitForWritability(_ waiter: Waiter<Void>) {
        guard let context = self.context, context.channel.isActive, !self.streamEnded else {
            waiter.resume(
                with: .failure(ResponderError(.connectionClosed, "the link closed while a response was being sent"))
            )
            return
        }
        if context.channel.isWritable {
            waiter.resume(with: .success(()))
        } else {
            self.writabilityWaiters.append(waiter)
        }
    }

    /// ``write(_:)`` and ``waitForWritability(_:)`` for a task off the event loop.
    func writeThenWaitForWritability(_ parts: some Sequence<HTTPResponsePart>) -> EventLoopFuture<Void> {
        let eventLoop = self.eventLoop
        do {
            if try self.write(parts) { return eventLoop.makeSucceededVoidFuture() }
        } catch {
            return eventLoop.makeFailedFuture(error)
        }
        let promise = eventLoop.makePromise(of: Void.self)
        self.waitForWritability(.promise(promise))
        return promise.futureResult
    }

    /// The link's task was cancelled: whatever it waits for fails with `CancellationError`.
    func cancelWaiters() {
        if let waiter = self.partWaiter {
            self.partWaiter = nil
            waiter.resume(with: .failure(CancellationError()))
        }
        self.resumeWritabilityWaiters(.failure(CancellationError()))
    }

    // MARK: Helpers

    private func endInbound(_ result: Result<Void, any Error>) {
        guard self.inboundEnd == nil else { return }
        self.inboundEnd = result
        // Parts still queued are read first; a waiter means the queue is empty.
        guard let waiter = self.partWaiter else { return }
        self.partWaiter = nil
        waiter.resume(with: result.map { nil })
    }

    private func failWritabilityWaiters() {
        self.resumeWritabilityWaiters(
            .failure(ResponderError(.connectionClosed, "the link closed while a response was being sent"))
        )
    }

    /// Resumes every writability waiter with `result`; the list is emptied first, since a
    /// resumed waiter on the event loop may wait again.
    private func resumeWritabilityWaiters(_ result: Result<Void, any Error>) {
        let waiters = self.writabilityWaiters
        self.writabilityWaiters.removeAll()
        for waiter in waiters { waiter.resume(with: result) }
    }
}

@available(*, unavailable)
extension ResponderLinkHandler: Sendable {}
