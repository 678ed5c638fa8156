import AccessoryTransport
import NIOCore
import Synchronization

/// A count of bytes, shared between an event loop and a test.
final class ByteCounter: Sendable {
    private let count = Atomic(0)
    func add(_ bytes: Int) { self.count.add(bytes, ordering: .relaxed) }
    var value: Int { self.count.load(ordering: .relaxed) }
}

/// Counts the bytes a link reads from its transport (`.inbound`) or writes to it (`.outbound`),
/// below everything else in the pipeline: what crossed the wire.
struct ByteCountingTransport: ByteStreamTransport {
    enum Direction: Sendable { case inbound, outbound }

    let inner: any ByteStreamTransport
    let counter: ByteCounter
    var direction: Direction = .inbound
    var description: String { self.inner.description }

    func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        let (counter, direction) = (self.counter, self.direction)
        return try await self.inner.open(on: eventLoop) { channel in
            do {
                switch direction {
                case .inbound: try channel.pipeline.syncOperations.addHandler(InboundCountingHandler(counter: counter))
                case .outbound:
                    try channel.pipeline.syncOperations.addHandler(OutboundCountingHandler(counter: counter))
                }
            } catch {
                return channel.eventLoop.makeFailedFuture(error)
            }
            return configure(channel)
        }
    }
}

final class InboundCountingHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    let counter: ByteCounter
    init(counter: ByteCounter) { self.counter = counter }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.counter.add(self.unwrapInboundIn(data).readableBytes)
        context.fireChannelRead(data)
    }
}

final class OutboundCountingHandler: ChannelOutboundHandler, Sendable {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let counter: ByteCounter
    init(counter: ByteCounter) { self.counter = counter }
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        self.counter.add(self.unwrapOutboundIn(data).readableBytes)
        context.write(data, promise: promise)
    }
}
