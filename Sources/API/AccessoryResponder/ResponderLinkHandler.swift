import AccessorySession
import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// The event-loop half of an HTTP/1.1 ``ResponderLink``: queues decoded request parts until the link's task
/// asks for them (reading from the peer only while fewer than `highWatermark` parts and
/// `highWatermarkBytes` body bytes wait), and writes its response parts.
final class ResponderLinkHandler: ChannelDuplexHandler, RemovableChannelHandler, ResponderLinkEnd {
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

    let eventLoop: any EventLoop
    private var context: ChannelHandlerContext?
    private let waits = LinkWaits()
    /// Body bytes queued in `waits`.
    private var queuedBytes = 0
    private var readHeldBack = false
    /// The session layer ended the stream this handler serves.
    private var streamEnded = false

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
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
        if !self.waits.arrived(part), case .body(let buffer) = part {
            self.queuedBytes += buffer.readableBytes
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
        if context.channel.isWritable { self.waits.resumeWritabilityWaiters(.success(())) }
        context.fireChannelWritabilityChanged()
    }

    /// Reads from the peer only while the queue has room.
    func read(context: ChannelHandlerContext) {
        if self.waits.queuedCount < Self.highWatermark && self.queuedBytes < Self.highWatermarkBytes {
            self.askForMore(context: context)
        } else {
            self.readHeldBack = true
        }
    }

    /// NIO's reads per readiness event while the handler keeps up (its default).
    static let readsPerEventKeepingUp: UInt = 4
    /// The reads per event last set; `nil` on a channel that refused the option.
    private var readsPerEvent: UInt? = ResponderLinkHandler.readsPerEventKeepingUp

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

    func takePart() -> LinkTaken {
        if let part = self.waits.takeQueued() {
            if case .body(let buffer) = part { self.queuedBytes -= buffer.readableBytes }
            if self.readHeldBack && self.waits.queuedCount < Self.highWatermark / 2
                && self.queuedBytes < Self.highWatermarkBytes / 2
            {
                self.readHeldBack = false
                if let context = self.context { self.askForMore(context: context) }
            }
            return .part(part)
        }
        return self.waits.nothingQueued
    }

    func wait(_ waiter: LinkWaiter<HTTPRequestPart?>) {
        guard self.waits.wait(waiter) else { return }
        if self.readHeldBack {
            self.readHeldBack = false
            if let context = self.context { self.askForMore(context: context) }
        }
    }

    /// Writes and flushes `parts`; returns whether the link can take more right away.
    func write(_ parts: some Sequence<HTTPResponsePart>) throws -> Bool {
        guard let context = self.context, context.channel.isActive, !self.streamEnded else {
            throw ResponderError(.connectionClosed, "the link closed before the response could be sent")
        }
        for part in parts {
            context.write(self.wrapOutboundOut(part), promise: nil)
        }
        context.flush()
        return context.channel.isWritable
    }

    /// Nothing to do on HTTP/1.1: an unread body is drained or the link closes.
    func resetAfterCompleteAnswer() {}

    func waitForWritability(_ waiter: LinkWaiter<Void>) {
        guard let context = self.context, context.channel.isActive, !self.streamEnded else {
            waiter.resume(
                with: .failure(ResponderError(.connectionClosed, "the link closed while a response was being sent"))
            )
            return
        }
        if context.channel.isWritable {
            waiter.resume(with: .success(()))
        } else {
            self.waits.waitForWritability(waiter)
        }
    }

    func cancelPartWaiter() {
        self.waits.cancelPartWaiter()
    }

    func cancelWritabilityWaiters() {
        self.waits.resumeWritabilityWaiters(.failure(CancellationError()))
    }

    // MARK: Helpers

    private func endInbound(_ result: Result<Void, any Error>) {
        self.waits.endInbound(result)
    }

    private func failWritabilityWaiters() {
        self.waits.resumeWritabilityWaiters(
            .failure(ResponderError(.connectionClosed, "the link closed while a response was being sent"))
        )
    }
}

@available(*, unavailable)
extension ResponderLinkHandler: Sendable {}
