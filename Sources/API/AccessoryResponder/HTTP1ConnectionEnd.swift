import NIOCore
import NIOHTTP1

/// Ends an HTTP/1.1 link gracefully when a shutdown began (`ChannelShouldQuiesceEvent`, from
/// ``ResponderShutdown``): at once if no exchange is under way, else once the answer under way
/// was written, with `Connection: close` on it if its head was not written yet (RFC 9112 §9.6),
/// and at the latest after `bound`. What NIO's HTTPServerPipelineHandler does on the same
/// event, without its pipelining (the link serves strictly in order and never needs it).
final class HTTP1ConnectionEnd: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let bound: TimeAmount
    /// From a request head until its answer's end was written.
    private var exchangeUnderWay = false
    private var quiescing = false
    private var closing = false
    private var timer: Scheduled<Void>?

    init(bound: TimeAmount) {
        self.bound = bound
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = Self.unwrapInboundIn(data) {
            // A request that came after the shutdown began is still answered: the host sent it
            // before it could know.
            self.exchangeUnderWay = true
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard self.quiescing else {
            if case .end = Self.unwrapOutboundIn(data) { self.exchangeUnderWay = false }
            context.write(data, promise: promise)
            return
        }
        switch Self.unwrapOutboundIn(data) {
        case .head(var head):
            head.headers.replaceOrAdd(name: "connection", value: "close")
            context.write(Self.wrapOutboundOut(.head(head)), promise: promise)
        case .body:
            context.write(data, promise: promise)
        case .end:
            self.exchangeUnderWay = false
            // The close waits for the answer's end to leave: NIO's close drops pending writes.
            let written = context.eventLoop.makePromise(of: Void.self)
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            written.futureResult.whenComplete { result in
                promise?.completeWith(result)
                let (handler, context) = loopBound.value
                handler.close(context: context)
            }
            context.writeAndFlush(data, promise: written)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ChannelShouldQuiesceEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        guard !self.quiescing else { return }
        self.quiescing = true
        if !self.exchangeUnderWay {
            self.close(context: context)
            return
        }
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        self.timer = context.eventLoop.scheduleTask(in: self.bound) {
            let (handler, context) = loopBound.value
            handler.close(context: context)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
    }

    private func close(context: ChannelHandlerContext) {
        guard !self.closing else { return }
        self.closing = true
        self.timer?.cancel()
        self.timer = nil
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension HTTP1ConnectionEnd: Sendable {}
