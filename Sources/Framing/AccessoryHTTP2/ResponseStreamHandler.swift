import AccessoryHTTP1
import NIOCore
import NIOHTTP2
import NIOHTTPTypes

/// The last handler of a client stream channel's pipeline (the link's streams when it decodes
/// compressed responses, which needs NIO's decompressor in a pipeline): it gathers the response
/// parts of each read into ``ResponseBatches`` for the exchange, and it holds further reads (so
/// the stream's flow-control window, and the device) while what waits is over the watermark.
///
/// Why not `NIOAsyncChannel`: its writer, its inbound sequence and their state machines cost a
/// `/status` exchange more than the stream itself did, and a bulk body a wake per DATA frame
/// (or, gathered, a copy of every byte).
///
/// Every method runs on the stream's event loop.
final class ResponseStreamHandler: ChannelDuplexHandler, ResponseBatches.Owner {
    typealias InboundIn = HTTPResponsePart
    // Outbound only for `read`: writes pass through.
    typealias OutboundIn = HTTPRequestPart
    typealias OutboundOut = HTTPRequestPart

    let batches: ResponseBatches
    private let highWatermark: Int
    private let resetCauses: StreamResetCauses
    private let connection: StreamChannelsConnection
    private var readHeld = false
    /// The stream was reset with an error code; the exchange ends on the next tick, with the
    /// error NIOHTTP2Handler reported for it if it did (``StreamResetCauses``).
    private var awaitingResetCause = false
    private var context: ChannelHandlerContext?

    /// - Parameters:
    ///   - batches: where the response goes; made on the stream's event loop.
    ///   - highWatermark: body bytes held before reads stop until the exchange takes them.
    ///   - resetCauses: the connection's record of why NIOHTTP2Handler reset a stream.
    ///   - connection: the connection's own handler (its errors, its liveness check).
    init(
        batches: ResponseBatches,
        highWatermark: Int,
        resetCauses: StreamResetCauses,
        connection: StreamChannelsConnection
    ) {
        self.batches = batches
        self.highWatermark = highWatermark
        self.resetCauses = resetCauses
        self.connection = connection
        batches.owner = self
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.connection.opened(ObjectIdentifier(self), batches: self.batches)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        self.connection.closed(ObjectIdentifier(self))
        self.batches.stop()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.batches.append(self.unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.batches.handOver()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !self.awaitingResetCause { self.batches.end(.closed) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let reset = error as? NIOHTTP2Errors.StreamClosed else {
            self.batches.end(.failed(error))
            return
        }
        // NIOHTTP2Handler reports why it reset the stream after this, if it was its reset.
        self.awaitingResetCause = true
        context.eventLoop.assumeIsolated().execute {
            self.awaitingResetCause = false
            if let cause = self.resetCauses.take(for: reset.streamID) {
                self.batches.end(.failed(cause))
            } else if self.connection.refused(reset.streamID) {
                // Closed by the device's GOAWAY, unprocessed: the exchange may send it again.
                self.batches.end(
                    .failed(
                        HTTP2StreamsRefused(
                            reason: "the device sent GOAWAY before it processed stream \(reset.streamID)"
                        )
                    )
                )
            } else {
                self.batches.end(.failed(reset))
            }
        }
    }

    func read(context: ChannelHandlerContext) {
        if self.batches.heldBytes >= self.highWatermark {
            self.readHeld = true
        } else {
            context.read()
        }
    }

    /// Closing a stream channel that is still open sends RST_STREAM.
    func resetStream() {
        self.context?.close(promise: nil)
    }

    func bodyBytesTaken(_ count: Int) {
        if self.readHeld, let context = self.context {
            self.readHeld = false
            context.read()
        }
    }

    func waitTimedOut() {
        self.connection.streamWentIdle(after: self.batches.idleTimeout)
    }
}

@available(*, unavailable)
extension ResponseStreamHandler: Sendable {}
