import AccessoryTransport
import NIOCore
import NIOHTTP2

/// The connection-level handler of a link that keeps its streams as NIO stream channels (it
/// decodes compressed responses), after NIOHTTP2Handler: what ``HTTP2ClientStreams`` does for
/// frame-level streams about the connection as a whole.
///
/// - An error that ends the connection's byte stream (a session error, ``HTTP2ConnectionSilence``:
///   a ``StreamEndingError``) ends every open stream's exchange with that error, so that an
///   idempotent request without a response byte is sent again on the next connection. NIO's
///   multiplexer does not hand connection errors to its stream channels: they only saw their
///   channel close ("ended before a response head"), and nothing was sent again.
/// - It runs the connection's ``LivenessCheck``: a stream channel sees only its own frames; this
///   one sees the end of every read and the PING acknowledgements on stream 0.
/// - It keeps the device's GOAWAY: streams above its last stream ID were not processed (RFC 9113
///   §6.8), and their exchanges may send them again (``refused(_:)``); no new stream opens here
///   (``refusal``). NIO closes those stream channels with CANCEL, which alone reads as a reset.
final class StreamChannelsConnection: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame
    typealias InboundOut = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private let check = LivenessCheck()
    private var context: ChannelHandlerContext?
    /// The responses of the open streams, by their handler.
    private var openStreams: [ObjectIdentifier: ResponseBatches] = [:]
    /// The last stream ID of the device's GOAWAY, once it sent one.
    private var goAwayLastStreamID: HTTP2StreamID?

    /// Why no new stream may open on this connection, if none may.
    var refusal: String? { self.goAwayLastStreamID == nil ? nil : "the device sent GOAWAY" }

    /// Whether the device's GOAWAY left stream `id` out: it was not processed.
    func refused(_ id: HTTP2StreamID) -> Bool {
        guard let last = self.goAwayLastStreamID else { return false }
        return id > last
    }

    init() {}

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.check.stop()
        self.context = nil
        self.openStreams = [:]
    }

    /// A stream's handler joined (on the connection's event loop, which stream channels share).
    func opened(_ stream: ObjectIdentifier, batches: ResponseBatches) {
        self.openStreams[stream] = batches
    }

    /// A stream's handler left.
    func closed(_ stream: ObjectIdentifier) {
        self.openStreams[stream] = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        if frame.streamID == .rootStream {
            self.check.received(frame)
            if case .goAway(let lastStreamID, _, _) = frame.payload {
                self.goAwayLastStreamID = min(lastStreamID, self.goAwayLastStreamID ?? lastStreamID)
            }
        }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.check.readCompleted()
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is any StreamEndingError {
            for batches in self.openStreams.values { batches.end(.failed(error)) }
        }
        context.fireErrorCaught(error)
    }

    /// A stream's wait ended at `idleTimeout` (its channel is closed already).
    func streamWentIdle(after idleTimeout: Duration) {
        guard let context = self.context else { return }
        self.check.streamWentIdle(after: idleTimeout, context: context) { silence in
            // Found in the pipeline, not kept (see HTTP2PrefaceAnswerWatch).
            if let streamEnd = try? self.context?.pipeline.syncOperations.handler(type: HTTP2StreamEnd.self) {
                streamEnd.giveUp(silence)
            } else {
                for batches in self.openStreams.values { batches.end(.failed(silence)) }
                self.context?.close(promise: nil)
            }
        }
    }
}

@available(*, unavailable)
extension StreamChannelsConnection: Sendable {}
