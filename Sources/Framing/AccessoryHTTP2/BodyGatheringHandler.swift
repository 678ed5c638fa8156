import NIOCore
import NIOHTTPTypes

/// Gathers the DATA of one read into one body part, in a response stream's pipeline.
///
/// One read from the connection brings many 16 KiB DATA frames; passed on one by one, each is
/// an element of the stream's async sequence and a hop to the task that reads the body, which
/// cost a bulk download most of its rate. Gathered, a read is one element, for the price of a
/// copy. Heads and the end go through at once, in order.
final class BodyGatheringHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPResponsePart
    typealias InboundOut = HTTPResponsePart

    private var gathered: ByteBuffer?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = self.unwrapInboundIn(data)
        guard case .body(let bytes) = part else {
            self.passGathered(context: context)
            context.fireChannelRead(data)
            return
        }
        guard bytes.readableBytes > 0 else { return }
        if self.gathered == nil {
            self.gathered = bytes  // a single frame is passed on as it came
        } else {
            self.gathered?.writeImmutableBuffer(bytes)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.passGathered(context: context)
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.passGathered(context: context)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.passGathered(context: context)
        context.fireErrorCaught(error)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        self.passGathered(context: context)
        context.fireUserInboundEventTriggered(event)
    }

    private func passGathered(context: ChannelHandlerContext) {
        guard let bytes = self.gathered else { return }
        self.gathered = nil
        context.fireChannelRead(self.wrapInboundOut(.body(bytes)))
    }
}

@available(*, unavailable)
extension BodyGatheringHandler: Sendable {}
