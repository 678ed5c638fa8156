import AccessoryTransport
import NIOCore

/// The bottom of a link's pipeline, for a graceful shutdown (``ResponderShutdown``): once one
/// began, closing the link waits until the host has taken what was written, at most
/// `lingerBound`, and what the host still sends meanwhile is read and dropped.
///
/// Why: NIO's close drops writes still pending, so an answer's tail would be lost; and a Linux
/// socket closed with unread input resets its peer, whose next write then fails and whose NIO
/// channel closes with the answer's tail still unread in its socket buffer. An HTTP/2 host
/// writes WINDOW_UPDATEs as it reads a download, so a close right after the last frame cut its
/// last 16 KiB once in a few tries (GracefulShutdownTests, with a session).
///
/// How it knows the host has taken everything: from the kernel's send queue (``sendQueue``,
/// `SIOCOUTQ` on a unix socket counts what the peer has not read), polled every 10 ms once the
/// channel's own buffer is empty. On a socket (`halfCloses`) it then ends the sending side and
/// waits for the host to end its own (a lingering close, as nginx does): the host may still be
/// writing about what it read last. Without a send queue, on a socket, it does that at once;
/// else it closes once the channel's buffer is empty.
///
/// Closes outside a graceful shutdown (a cancel, a broken link) stay immediate.
final class GracefulTransportClose: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// The kernel's send queue under the channel, when known (set once the transport is open).
    var sendQueue: KernelSendQueue?
    private let halfCloses: Bool
    private let lingerBound: TimeAmount
    private var graceful = false
    /// Closing: input is drained and dropped, the close waits.
    private var draining = false
    private var inputEnded = false
    private var closePromise: EventLoopPromise<Void>?
    private var deadline: NIODeadline = .distantFuture
    private var timer: Scheduled<Void>?

    init(halfCloses: Bool, lingerBound: TimeAmount) {
        self.halfCloses = halfCloses
        self.lingerBound = lingerBound
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent {
            self.graceful = true
        } else if case .inputClosed = event as? ChannelEvent {
            self.inputEnded = true
            if self.draining {
                self.finish(context: context)
                return
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.draining else { return }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        guard !self.draining else {
            context.read()  // keep draining: unread input would reset the host
            return
        }
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        self.draining = false
        // Closed while waiting (the host closed or reset the link): the close is done.
        if let closePromise = self.closePromise {
            self.closePromise = nil
            closePromise.succeed(())
        }
        context.fireChannelInactive()
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard self.graceful, mode == .all, context.channel.isActive else {
            context.close(mode: mode, promise: promise)
            return
        }
        if let closePromise = self.closePromise {
            promise.map { closePromise.futureResult.cascade(to: $0) }
            return
        }
        let closePromise = context.eventLoop.makePromise(of: Void.self)
        self.closePromise = closePromise
        promise.map { closePromise.futureResult.cascade(to: $0) }
        self.deadline = .now() + self.lingerBound
        self.draining = true
        context.read()
        // An empty write completes after every write before it, in order: then the channel's
        // own buffer is empty.
        let written = context.eventLoop.makePromise(of: Void.self)
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        self.timer = context.eventLoop.scheduleTask(deadline: self.deadline) {
            let (handler, context) = loopBound.value
            handler.finish(context: context)
        }
        written.futureResult.whenComplete { result in
            let (handler, context) = loopBound.value
            guard case .success = result, handler.closePromise != nil, !handler.inputEnded else {
                handler.finish(context: context)
                return
            }
            if handler.sendQueue != nil {
                handler.waitForEmptySendQueue(context: context)
            } else if handler.halfCloses {
                handler.endSendingSide(context: context)
            } else {
                handler.finish(context: context)
            }
        }
        context.writeAndFlush(self.wrapOutboundOut(ByteBuffer()), promise: written)
    }

    private func waitForEmptySendQueue(context: ChannelHandlerContext) {
        guard self.closePromise != nil else { return }
        guard context.channel.isActive, let unsent = self.sendQueue?.unsentBytes(), NIODeadline.now() < self.deadline
        else {
            self.finish(context: context)
            return
        }
        guard unsent > 0 else {
            // The host has read everything, but it may still be writing: an HTTP/2 host sends a
            // WINDOW_UPDATE for the last bytes it read while it decodes them. Closed now, that
            // write would find the link reset, and the host's NIO channel would close on it, in
            // the middle of that read, before the answer's end it already holds was handed on
            // (GracefulShutdownTests, HTTP/2, once in about 100 shutdowns). On a socket the
            // sending side ends and the close waits for the host to end its own.
            if self.halfCloses {
                self.endSendingSide(context: context)
            } else {
                self.finish(context: context)
            }
            return
        }
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: .milliseconds(10)) {
            let (handler, context) = loopBound.value
            handler.waitForEmptySendQueue(context: context)
        }
    }

    /// Ends the sending side; the close follows the host's end of its own (or the bound).
    private func endSendingSide(context: ChannelHandlerContext) {
        let shutDown = context.eventLoop.makePromise(of: Void.self)
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        shutDown.futureResult.whenComplete { result in
            let (handler, context) = loopBound.value
            if case .failure = result { handler.finish(context: context) }
        }
        context.close(mode: .output, promise: shutDown)
    }

    private func finish(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        guard let closePromise = self.closePromise else { return }
        self.closePromise = nil
        self.draining = false
        context.close(mode: .all, promise: closePromise)
    }
}

@available(*, unavailable)
extension GracefulTransportClose: Sendable {}
