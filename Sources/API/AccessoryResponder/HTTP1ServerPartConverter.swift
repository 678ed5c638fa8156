import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// Converts NIO's HTTP/1 request parts to swift-http-types parts and back for responses.
///
/// It replaces `HTTP1ToHTTPServerCodec` for two reasons: that codec parses every request
/// target with `URLComponents` (costly at tens of thousands of requests a second, and only
/// needed for the rare absolute form), and it drops the HTTP version, so an HTTP/1.0 request
/// could not be told to close. Here an HTTP/1.0 request without `Connection: keep-alive` gets
/// `Connection: close` added, so the responder closes after answering it.
///
/// It also ends the link gracefully once a shutdown began (``HTTP1LinkEnd``, at the latest
/// after `shutdownBound`): it already sees every request head and every response part, and one
/// handler less is one hop less for every part of every exchange.
final class HTTP1ServerPartConverter: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// Set after a head could not be converted: the rest of that request is dropped, because the
    /// stream is already failed and the link will close.
    private var discarding = false
    private var linkEnd = HTTP1LinkEnd()
    private let shutdownBound: TimeAmount
    private var closing = false
    private var shutdownTimer: Scheduled<Void>?

    init(shutdownBound: TimeAmount) {
        self.shutdownBound = shutdownBound
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch Self.unwrapInboundIn(data) {
        case .head(let head):
            self.linkEnd.requestHeadArrived()
            do {
                let request = try Self.convert(head)
                self.discarding = false
                context.fireChannelRead(Self.wrapInboundOut(.head(request)))
            } catch {
                self.discarding = true
                context.fireErrorCaught(error)
            }
        case .body(let body):
            guard !self.discarding else { return }
            context.fireChannelRead(Self.wrapInboundOut(.body(body)))
        case .end(let trailers):
            guard !self.discarding else { return }
            let fields = trailers.map { HTTPFields($0, splitCookie: false) }
            context.fireChannelRead(Self.wrapInboundOut(.end(fields)))
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch Self.unwrapOutboundIn(data) {
        case .head(var response):
            self.linkEnd.responseHead(&response)
            context.write(Self.wrapOutboundOut(.head(HTTPResponseHead(response))), promise: promise)
        case .body(let body):
            context.write(Self.wrapOutboundOut(.body(.byteBuffer(body))), promise: promise)
        case .end(let trailers):
            let end = Self.wrapOutboundOut(.end(trailers.map { HTTPHeaders($0) }))
            guard self.linkEnd.responseEnded() else {
                context.write(end, promise: promise)
                return
            }
            // The close waits for the answer's end to leave: NIO's close drops pending writes.
            let written = context.eventLoop.makePromise(of: Void.self)
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            written.futureResult.whenComplete { result in
                promise?.completeWith(result)
                let (handler, context) = loopBound.value
                handler.closeLink(context: context)
            }
            context.writeAndFlush(end, promise: written)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ChannelShouldQuiesceEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        switch self.linkEnd.quiesce() {
        case .nothing:
            break
        case .closeNow:
            self.closeLink(context: context)
        case .closeAfterAnswer:
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            self.shutdownTimer = context.eventLoop.scheduleTask(in: self.shutdownBound) {
                let (handler, context) = loopBound.value
                handler.closeLink(context: context)
            }
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.shutdownTimer?.cancel()
        self.shutdownTimer = nil
    }

    private func closeLink(context: ChannelHandlerContext) {
        guard !self.closing else { return }
        self.closing = true
        self.shutdownTimer?.cancel()
        self.shutdownTimer = nil
        context.close(promise: nil)
    }

    static func convert(_ head: HTTPRequestHead) throws -> HTTPRequest {
        let method: HTTPRequest.Method
        do {
            method = try HTTPRequest.Method(head.method)
        } catch {
            throw ResponderError(.malformedRequest, "the request method \(head.method) is not valid")
        }
        guard head.version.major == 1 else {
            throw ResponderError(.malformedRequest, "HTTP/\(head.version.major).\(head.version.minor) is not supported")
        }
        let hosts = head.headers["host"]
        guard hosts.count <= 1 else {
            throw ResponderError(.malformedRequest, "the request has more than one Host header")
        }
        // RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without Host. (HTTP/1.0
        // predates Host and may leave it out.)
        guard hosts.count == 1 || head.version.minor == 0 else {
            throw ResponderError(
                .malformedRequest,
                "an HTTP/1.1 request must carry a Host header (RFC 9112 §3.2); any name will do, e.g. Host: accessory"
            )
        }
        guard let path = Self.path(fromRequestTarget: head.uri) else {
            throw ResponderError(.malformedRequest, "the request target is not valid")
        }
        var fields = HTTPFields(head.headers, splitCookie: false)
        if head.version.minor == 0 && !head.isKeepAlive {
            fields[.connection] = "close"
        }
        return HTTPRequest(method: method, scheme: "http", authority: hosts.first, path: path, headerFields: fields)
    }

    /// The origin-form path of a request target (RFC 9112 §3.2): origin form and `*` as they
    /// are, the path and query of an absolute form.
    static func path(fromRequestTarget target: String) -> String? {
        let utf8 = target.utf8
        guard let first = utf8.first else { return nil }
        if first == UInt8(ascii: "/") || target == "*" { return target }
        // Absolute form: scheme "://" authority [path-abempty] ["?" query]
        guard let colon = target.firstIndex(of: ":"), target[colon...].hasPrefix("://") else { return nil }
        let afterAuthority = target[target.index(colon, offsetBy: 3)...]
        guard let pathStart = afterAuthority.firstIndex(where: { $0 == "/" || $0 == "?" }) else { return "/" }
        let rest = afterAuthority[pathStart...]
        return rest.first == "?" ? "/" + rest : String(rest)
    }
}

@available(*, unavailable)
extension HTTP1ServerPartConverter: Sendable {}
