import AccessoryTransport
import NIOCore
import NIOHTTP2
import Synchronization

/// Whether an HTTP/2 connection gave its byte stream up in band (``HTTP2StreamEnd``): then its
/// channel stays open and the link's next request starts a new stream on it (a new session)
/// instead of opening the transport again. Read from any thread.
final class HTTP2StreamParking: Sendable {
    private let parked = Atomic<Bool>(false)

    var isParked: Bool { self.parked.load(ordering: .acquiring) }

    func park() { self.parked.store(true, ordering: .releasing) }
}

/// The bottom of an HTTP/2 connection's handlers, right above the byte stream (the session
/// layer, or TLS inside it): it ends the connection's stream when what is below fails (a
/// damaged frame, a peer found dead, the device's CLOSE) or when the connection is done (a
/// GOAWAY either way, its stream IDs ran out).
///
/// It gives the stream up with ``ByteStreamEndRequest``, as the HTTP/1.1 link does. A session
/// layer below takes it: the device is told, the channel stays open, and this handler removes
/// the connection's handlers (NIOHTTP2Handler and the streams after it, whose exchanges fail
/// with the error that ended the stream) and itself, so that the next request builds a new
/// connection on a new session in band: no new child process, no tty or USB interface opened
/// again. Without such a layer the event fails, and the channel closes, as before.
final class HTTP2StreamEnd: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    let parking = HTTP2StreamParking()
    /// The connection's handlers above this one, removed with it when the stream is given up.
    var handlersAbove: [any RemovableChannelHandler] = []
    private var context: ChannelHandlerContext?
    private var ending = false
    /// The channel's own inactivity passed through here (to NIOHTTP2Handler above).
    private var channelWentInactive = false

    init() {}

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        self.handlersAbove = []  // they may hold this handler (``end()``): no cycle left behind
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.channelWentInactive = true
        context.fireChannelInactive()
    }

    /// An error from below ended the stream: the connection above learns it first (its
    /// exchanges fail with it), then the stream is given up.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.fireErrorCaught(error)
        self.end()
    }

    /// Ends the stream for `error` found above the byte stream (``HTTP2PrefaceAnswerWatch``), as
    /// if it came from below: the connection learns it first, then the stream is given up.
    func giveUp(_ error: any Error) {
        guard !self.ending, let context = self.context else { return }
        context.fireErrorCaught(error)
        self.end()
    }

    /// Gives the stream up: in band when the layer below can start another one, else by
    /// closing the channel. On the event loop; once.
    func end() {
        guard !self.ending, let context = self.context else { return }
        self.ending = true
        guard context.channel.isActive else { return }
        let ended = context.eventLoop.makePromise(of: Void.self)
        ended.futureResult.assumeIsolated().whenComplete { result in
            switch result {
            case .success:
                self.parking.park()
                self.leave(context: context)
            case .failure:
                context.close(promise: nil)
            }
        }
        context.triggerUserOutboundEvent(ByteStreamEndRequest(), promise: ended)
    }

    /// Removes the connection's handlers and this one, top first: NIOHTTP2Handler's removal ends
    /// its stream channels, the frame-level streams' fails their exchanges.
    private func leave(context: ChannelHandlerContext) {
        let sync = context.pipeline.syncOperations
        // NIOHTTP2Handler closes its stream channels when its channel goes inactive, not when it
        // is removed: a connection that kept stream channels (one that decodes compressed
        // responses) left them with its multiplexer, each holding the other, for ever (33
        // connections' worth in one AddressSanitizer run of HTTP2RenewalTests). Its connection
        // is over, so it is told so first; its streams close without writing anything.
        //
        // Not when the channel already closed: telling the session layer (its CLOSE flushed into
        // a link the device had just reset) can close it synchronously, and NIOHTTP2Handler,
        // told twice, stops the process on an assertion (seen when a responder shut down under
        // eight concurrent requests, GracefulShutdownTests).
        if !self.channelWentInactive && context.channel.isActive {
            for case let http2 as NIOHTTP2Handler in self.handlersAbove {
                if let above = try? sync.context(handler: http2) { http2.channelInactive(context: above) }
            }
        }
        for handler in self.handlersAbove.reversed() {
            if let above = try? sync.context(handler: handler) { sync.removeHandler(context: above, promise: nil) }
        }
        self.handlersAbove = []
        sync.removeHandler(context: context, promise: nil)
    }
}

/// The HTTP/2 handler has no removal of its own; a link, or the responder, renews a stream's
/// handlers by removing them, and an HTTP/2 connection whose session ended is over: its
/// streams are failed as the handler leaves (its `handlerRemoved`).
extension NIOHTTP2Handler: @retroactive RemovableChannelHandler {}
