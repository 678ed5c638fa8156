import NIOCore
import NIOHTTP2

/// Ends an HTTP/2 connection whose host has stopped sending (its end of the byte stream closed:
/// `ChannelEvent.inputClosed`). An HTTP/1.1 link answers what it has and closes; without this,
/// an HTTP/2 connection would wait for streams that can never come, and the link would stay
/// open for good. It closes once no stream is open, or after `grace` if some still are (a
/// stream whose answer needs the host's WINDOW_UPDATEs can no longer finish). Found by the
/// `request` fuzz target: the preface and a SETTINGS frame, then the end of input.
final class HTTP2InputEndHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Any

    private let grace: TimeAmount
    private var openStreams = 0
    private var inputEnded = false
    private var timer: Scheduled<Void>?

    init(grace: TimeAmount = .seconds(2)) {
        self.grace = grace
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case is NIOHTTP2StreamCreatedEvent:
            self.openStreams += 1
        case is StreamClosedEvent:
            self.openStreams = max(0, self.openStreams - 1)
            if self.inputEnded && self.openStreams == 0 { context.close(promise: nil) }
        case let event as ChannelEvent where event == .inputClosed:
            self.inputEnded = true
            if self.openStreams == 0 {
                context.close(promise: nil)
            } else {
                self.timer = context.eventLoop.assumeIsolated().scheduleTask(in: self.grace) {
                    context.close(promise: nil)
                }
            }
        default:
            break
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        context.fireChannelInactive()
    }
}
