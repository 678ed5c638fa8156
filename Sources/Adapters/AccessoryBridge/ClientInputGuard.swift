import NIOCore
import NIOHTTP1

/// Answers what a client sent wrong before the bridge sees a request, then closes: a request
/// NIO's parser refuses (400, or 431 when its head is too large), and a client that leaves the
/// connection silent, or half a request head unsent, for longer than the idle timeout (408: a
/// slowloris holds nothing for long). While an exchange runs the connection is left alone: a
/// long download reads nothing from the client, rightly.
final class ClientInputGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let idleTimeout: TimeAmount
    /// For the 408: NIO's pipeline handler refuses a response when no request came.
    private let raw: RawWriter
    private var idleTimer: Scheduled<Void>?
    /// A response head went out and its end has not.
    private var responding = false
    /// A request head came in and its answer has not ended.
    private var exchanging = false

    init(idleTimeout: TimeAmount, raw: RawWriter) {
        self.idleTimeout = idleTimeout
        self.raw = raw
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { self.armIdleTimer(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        self.armIdleTimer(context: context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.idleTimer?.cancel()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.idleTimer?.cancel()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = self.unwrapInboundIn(data) {
            self.exchanging = true
            self.idleTimer?.cancel()
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch self.unwrapOutboundIn(data) {
        case .head(let head) where head.status.code >= 200:
            self.responding = true
        case .end:
            self.responding = false
            self.exchanging = false
            self.armIdleTimer(context: context)
        default:
            break
        }
        context.write(data, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parserError = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        if !self.responding {
            let (status, reason): (HTTPResponseStatus, String) =
                parserError == .headerOverflow
                ? (.requestHeaderFieldsTooLarge, "the request head is larger than the bridge accepts (80 KiB)")
                : (.badRequest, "the request is not valid HTTP/1.1 (\(parserError))")
            self.answerAndClose(status, reason, context: context)
        } else {
            context.close(promise: nil)
        }
    }

    private func armIdleTimer(context: ChannelHandlerContext) {
        self.idleTimer?.cancel()
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        self.idleTimer = context.eventLoop.scheduleTask(in: self.idleTimeout) {
            let (handler, context) = loopBound.value
            guard !handler.exchanging, !handler.responding, context.channel.isActive else { return }
            let reason = "no complete request within \(handler.idleTimeout.nanoseconds / 1_000_000) ms\n"
            handler.responding = true
            handler.raw.sendAndClose(
                ByteBuffer(
                    string:
                        "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\n"
                        + "Content-Length: \(reason.utf8.count)\r\n\r\n\(reason)"
                )
            )
        }
    }

    private func answerAndClose(_ status: HTTPResponseStatus, _ reason: String, context: ChannelHandlerContext) {
        let body = ByteBuffer(string: reason + "\n")
        let headers = HTTPHeaders([
            ("Connection", "close"), ("Content-Type", "text/plain; charset=utf-8"),
            ("Content-Length", String(body.readableBytes)),
        ])
        self.responding = true
        context.write(
            self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))),
            promise: nil
        )
        context.write(self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        context.writeAndFlush(self.wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }
}

/// Writes bytes straight to the socket, beneath the HTTP handlers (it is first in the pipeline).
final class RawWriter: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func sendAndClose(_ bytes: ByteBuffer) {
        guard let context = self.context else { return }
        context.writeAndFlush(self.wrapOutboundOut(.byteBuffer(bytes))).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }
}
