import NIOCore

/// The only handler of a child's stderr channel: appends everything read to a ring buffer.
final class StderrCollector: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer

    private let buffer: StderrRingBuffer

    init(into buffer: StderrRingBuffer) {
        self.buffer = buffer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.buffer.append(Self.unwrapInboundIn(data))
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.buffer.markEnded()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A read error on stderr only means there is no more of it to collect.
        context.close(promise: nil)
    }
}
