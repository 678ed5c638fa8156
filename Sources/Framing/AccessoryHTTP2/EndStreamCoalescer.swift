import NIOCore
import NIOHTTP2

/// Folds the empty DATA frame that ends a stream into the frame before it, in a stream's
/// pipeline under the HTTP-types codec.
///
/// The codec turns a message's end into a DATA frame of its own: a GET went out as HEADERS
/// plus an empty DATA with END_STREAM, a response as HEADERS, DATA and another empty DATA, one
/// frame more each way than HTTP/2 needs (`-v` showed them). Held until the next write or the
/// flush, the frame before takes the END_STREAM flag instead, when both are in the same flush.
public final class EndStreamCoalescer: ChannelOutboundHandler, RemovableChannelHandler {
    public typealias OutboundIn = HTTP2Frame.FramePayload
    public typealias OutboundOut = HTTP2Frame.FramePayload

    private var held: (payload: HTTP2Frame.FramePayload, promise: EventLoopPromise<Void>?)?

    /// A coalescer holding nothing; one goes in each stream's pipeline.
    public init() {}

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let payload = self.unwrapOutboundIn(data)
        if case .data(let end) = payload, end.endStream, end.data.readableBytes == 0, end.paddingBytes == nil,
            let (previous, previousPromise) = self.held, let merged = Self.ending(previous)
        {
            self.held = nil
            let combined = previousPromise ?? promise
            if let previousPromise, let promise { previousPromise.futureResult.cascade(to: promise) }
            context.write(self.wrapOutboundOut(merged), promise: combined)
            return
        }
        self.release(context: context)
        switch payload {
        case .headers(let headers) where !headers.endStream:
            self.held = (payload, promise)
        case .data(let data) where !data.endStream:
            self.held = (payload, promise)
        default:
            context.write(data, promise: promise)
        }
    }

    public func flush(context: ChannelHandlerContext) {
        self.release(context: context)
        context.flush()
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        self.release(context: context)
    }

    private func release(context: ChannelHandlerContext) {
        guard let (payload, promise) = self.held else { return }
        self.held = nil
        context.write(self.wrapOutboundOut(payload), promise: promise)
    }

    /// `payload` with END_STREAM set, if it is a HEADERS or DATA frame that can carry it.
    public static func ending(_ payload: HTTP2Frame.FramePayload) -> HTTP2Frame.FramePayload? {
        switch payload {
        case .headers(var headers):
            headers.endStream = true
            return .headers(headers)
        case .data(var data):
            data.endStream = true
            return .data(data)
        default:
            return nil
        }
    }
}

@available(*, unavailable)
extension EndStreamCoalescer: Sendable {}
