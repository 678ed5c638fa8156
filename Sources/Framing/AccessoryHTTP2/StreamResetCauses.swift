import NIOCore
import NIOHTTP2

/// Why NIOHTTP2Handler reset a stream channel, for a link that keeps its streams as channels
/// (``ResponseStreamHandler``): the handler after NIOHTTP2Handler on the connection, and its
/// frame delegate.
///
/// When a device's frame breaks a rule of its stream (an upper-case field name, a
/// connection-specific field), NIOHTTP2Handler resets the stream and reports the error on the
/// connection's pipeline without naming the stream, while the stream channel gets only "reset
/// with PROTOCOL_ERROR", which reads as if the device had reset it. This pairs each reset the
/// handler writes with the error reported beside it, in either order (the reset goes out at once,
/// then the error comes; or it waits in the handler's buffer until the read's end, after the
/// error), and keeps the pair two event-loop ticks: the stream channel asks one tick after its
/// reset (``take(for:)``). Every method runs on the connection's event loop.
final class StreamResetCauses: ChannelInboundHandler, RemovableChannelHandler, NIOHTTP2FrameDelegate {
    typealias InboundIn = HTTP2Frame

    private var context: ChannelHandlerContext?
    /// Streams the handler reset in this tick, no error beside them yet.
    private var resetsWithoutCause: [HTTP2StreamID] = []
    /// An error the handler reported, in the current read, before its reset went out.
    private var errorWithoutReset: (any Error)?
    private var causes: [HTTP2StreamID: any Error] = [:]

    init() {}

    /// The error NIOHTTP2Handler reported for its reset of stream `id`, if any.
    func take(for id: HTTP2StreamID) -> (any Error)? {
        self.causes.removeValue(forKey: id)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A StreamError names its stream, and NIO hands its base error to that stream channel.
        if !(error is NIOHTTP2Errors.StreamError) {
            if let id = self.resetsWithoutCause.popLast() {
                self.keep(error, for: id)
            } else {
                self.errorWithoutReset = error
            }
        }
        context.fireErrorCaught(error)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // NIOHTTP2Handler has sent what it buffered in this read (its resets included) by now.
        self.errorWithoutReset = nil
        context.fireChannelReadComplete()
    }

    /// Sees every frame NIOHTTP2Handler writes: RST_STREAM from a stream channel's own close
    /// too, which no error follows (its pairing is dropped two ticks later, unused).
    func wroteFrame(_ frame: HTTP2Frame) {
        guard case .rstStream = frame.payload else { return }
        if let error = self.errorWithoutReset {
            self.errorWithoutReset = nil
            self.keep(error, for: frame.streamID)
        } else {
            self.resetsWithoutCause.append(frame.streamID)
            self.forget(frame.streamID)
        }
    }

    private func keep(_ error: any Error, for id: HTTP2StreamID) {
        self.causes[id] = error
        self.forget(id)
    }

    /// Drops what is kept for stream `id` two ticks from now: after the stream channel, which
    /// asks one tick after its reset, had it.
    private func forget(_ id: HTTP2StreamID) {
        guard let eventLoop = self.context?.eventLoop else { return }
        eventLoop.assumeIsolated().execute {
            eventLoop.assumeIsolated().execute {
                self.causes[id] = nil
                self.resetsWithoutCause.removeAll { $0 == id }
            }
        }
    }
}

@available(*, unavailable)
extension StreamResetCauses: Sendable {}
