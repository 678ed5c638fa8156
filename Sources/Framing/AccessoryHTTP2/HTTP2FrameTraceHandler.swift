import AccessoryHTTP1
import NIOCore

/// Under the HTTP/2 handler when `-v` traces the link: one note per HTTP/2 frame each way
/// (`> h2 SETTINGS stream=0 len=12 ENABLE_PUSH=0 …`, `< h2 RST_STREAM stream=3 len=4 CANCEL`),
/// read by ``HTTP2FrameScanner`` from the bytes as they pass. DATA frames are left out except
/// the last of a stream: the body's bytes are already in the trace, and a download would
/// otherwise print a line per 16 KiB.
final class HTTP2FrameTraceHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private let tracer: LinkTracer
    private var sent: HTTP2FrameScanner
    private var received: HTTP2FrameScanner

    /// - Parameter client: this side is the client (it sends the connection preface).
    init(tracer: LinkTracer, client: Bool) {
        self.tracer = tracer
        self.sent = HTTP2FrameScanner(client: client)
        self.received = HTTP2FrameScanner(client: !client)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.emit(self.received.scan(self.unwrapInboundIn(data)), marker: "<")
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .byteBuffer(let bytes) = self.unwrapOutboundIn(data) {
            self.emit(self.sent.scan(bytes), marker: ">")
        }
        context.write(data, promise: promise)
    }

    private func emit(_ lines: [String], marker: String) {
        for line in lines where !line.hasPrefix("DATA ") || line.contains("END_STREAM") {
            self.tracer.emit(.note("\(marker) h2 \(line)"))
        }
    }
}

@available(*, unavailable)
extension HTTP2FrameTraceHandler: Sendable {}
