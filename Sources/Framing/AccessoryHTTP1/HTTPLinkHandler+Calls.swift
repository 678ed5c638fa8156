import HTTPTypes
import NIOCore

/// The calls the async side makes on the handler (on the event loop) once an exchange is under
/// way: each is fed to the ``LinkStateMachine`` or writes the request's body.
extension HTTPLinkHandler {
    /// Discards input until the line has been quiet for the configured period (or the maximum
    /// settle time passed). Used after reopening a transport that may carry stale bytes.
    func settle() -> EventLoopFuture<Void> {
        let tracer = self.configuration.tracer
        return self.guardHandler.settle(
            quietPeriod: TimeAmount(self.configuration.settleQuietPeriod),
            maxDuration: TimeAmount(self.configuration.settleMaxDuration),
            on: self.eventLoop
        ).map { discarded in
            if discarded > 0 { tracer?.emit(.note("discarded \(discarded) stale byte(s) after reopening")) }
        }
    }

    /// Hands the body of exchange `id` to its consumer: the whole body when it has already
    /// arrived, else a stream that starts with what has arrived so far.
    func claimBody(
        _ pending: PendingResponseBody,
        id: UInt64,
        bodyHandler: NIOLoopBound<HTTPLinkHandler>
    ) -> HTTPResponseBody {
        let claimed = pending.claim { self.makeProducer(id: id, bodyHandler: bodyHandler) }
        guard let (source, wantsMore) = claimed.continuing else { return claimed.body }
        if self.ports?.id == id, self.ports?.body.claim(pending, continuingIn: source) == true {
            self.run(self.machine.consumerDemand(id: id, wantsMore: wantsMore))
        } else {
            source.finish(self.failure ?? HTTPLinkError(.linkClosed, "the link closed during the response"))
        }
        return claimed.body
    }

    /// Writes one part of a streamed request body. The future completes when the link can take
    /// more (back-pressure), so a fast producer never fills memory.
    func writeBody(id: UInt64, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        guard let context = self.context, let ports = self.ports, ports.id == id, self.failure == nil,
            !ports.requestBodyAbandonment.isRecorded
        else {
            return self.eventLoop.makeFailedFuture(
                self.failure ?? HTTPLinkError(.linkClosed, "the link closed while the request body was being sent")
            )
        }
        self.configuration.tracer?.emit(.requestBody(buffer))
        // A failed write surfaces through errorCaught/channelInactive, which fail the exchange.
        context.writeAndFlush(self.wrapOutboundOut(.body(.byteBuffer(buffer))), promise: self.progressPromise())
        if context.channel.isWritable { return context.eventLoop.makeSucceededVoidFuture() }
        return self.ports?.waitForWritability(on: context.eventLoop) ?? context.eventLoop.makeSucceededVoidFuture()
    }

    /// The streamed request body ended, followed by `trailers` (only for a chunked body).
    func endRequest(id: UInt64, trailers: HTTPFields? = nil) {
        guard let ports = self.ports, ports.id == id, self.failure == nil, !ports.requestBodyAbandonment.isRecorded
        else { return }
        self.writeEnd(id: id, body: nil, trailers: trailers)
    }

    /// The caller's body source failed: the request on the wire is incomplete, so the link
    /// cannot be trusted again.
    func failRequest(id: UInt64, _ error: HTTPLinkError) {
        guard let ports = self.ports, ports.id == id, !ports.requestBodyAbandonment.isRecorded else { return }
        self.fail(error)
    }

    func consumerWantsMore(id: UInt64) {
        self.run(self.machine.consumerDemand(id: id, wantsMore: true))
    }

    /// The caller is done with the response (finished, threw, or was cancelled).
    func consumerGone(id: UInt64) {
        self.run(self.machine.consumerGone(id: id))
    }

    /// The caller's task was cancelled.
    func cancel(id: UInt64) {
        self.run(self.machine.cancelled(id: id))
    }

    /// Closes the link (the owner is shutting down or giving up on it).
    func close(reason: HTTPLinkError) {
        self.fail(reason)
    }
}
