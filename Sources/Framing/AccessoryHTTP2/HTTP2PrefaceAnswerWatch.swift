import AccessoryHTTP1
import NIOCore

/// Gives an HTTP/2 connection up when the device sends nothing at all within a bound after the
/// connection starts: a device whose HTTP/2 side works answers the connection preface with its
/// SETTINGS at once (RFC 9113 §3.4), so silence there means that side never started.
///
/// Without this watch such a connection lived as long as the line under it did (a session layer
/// keeps answering its pings whatever the HTTP layer does): every stream timed out on its own
/// and was reset, and the connection was never given up, so the link never healed. With it, the
/// waiting exchanges fail with `HTTPLinkError` `idle-timeout` saying why, and the stream is
/// given up (``HTTP2StreamEnd``): in band on a session layer, so the next request starts a new
/// session and a new connection on the same line; else the channel closes and the next request
/// opens the transport again.
///
/// It sits right above ``HTTP2StreamEnd`` and sees bytes, not frames: any byte ends its job (a
/// SETTINGS frame, or something NIOHTTP2Handler refuses as a connection error, which ends the
/// connection by itself), and it then leaves the pipeline, so it costs nothing per exchange.
final class HTTP2PrefaceAnswerWatch: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let bound: Duration
    private var timer: Scheduled<Void>?
    private var answered = false

    /// - Parameter bound: how long the device may send nothing after the connection starts (the
    ///   link's idle timeout).
    init(bound: Duration) {
        self.bound = bound
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // The bound counts from the connection's build: the preface goes out as the channel is
        // (or becomes) active, and a connection renewed in band is active already.
        let bound = self.bound
        self.timer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(bound)) {
            self.timer = nil
            // The stream's end is found in the pipeline, not kept: with a weak reference to it,
            // LeakSanitizer reported its side table at a CLI's exit (an object reaches its side
            // table only through its encoded reference count, which the tool cannot follow).
            guard !self.answered,
                let streamEnd = try? context.pipeline.syncOperations.handler(type: HTTP2StreamEnd.self)
            else { return }
            streamEnd.giveUp(
                HTTPLinkError(
                    .idleTimeout,
                    "the device sent nothing for \(bound) after the HTTP/2 connection preface; an HTTP/2 "
                        + "device answers it with its SETTINGS at once (RFC 9113 §3.4), so its HTTP/2 side did "
                        + "not start. The connection was given up and the next request starts a new one "
                        + "(a device that speaks only HTTP/1.1 needs http=1.1)"
                )
            )
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
        guard !self.answered else { return }
        self.answered = true
        self.timer?.cancel()
        self.timer = nil
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}

@available(*, unavailable)
extension HTTP2PrefaceAnswerWatch: Sendable {}
