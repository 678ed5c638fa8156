import NIOCore

/// What a stream turned out to speak, with what its serving task needs for it.
enum NegotiatedLink: Sendable {
    case http1(ResponderLink)
    /// HTTP/2 with prior knowledge (RFC 9113 §3.3): the connection's request streams, each
    /// served as a ``ResponderLink``.
    case http2(NIOLoopBound<HTTP2ServerStreams>)
}

/// Looks at the first bytes of a stream: the HTTP/2 connection preface makes it an HTTP/2
/// link, anything else an HTTP/1.1 link. It installs the handlers for that version behind
/// itself, hands them the bytes it looked at, and leaves the pipeline. An HTTP/1.1 request is
/// decided on its first byte or two (no method starts with "PR"), so plain requests wait for
/// nothing.
final class HTTPVersionDetector: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    private let configuration: ResponderConfiguration
    private let promise: EventLoopPromise<NegotiatedLink>
    private var seen = ByteBuffer()
    private var decided = false

    init(configuration: ResponderConfiguration, promise: EventLoopPromise<NegotiatedLink>) {
        self.configuration = configuration
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = self.unwrapInboundIn(data)
        self.seen.writeBuffer(&bytes)
        let prefix = self.seen.readableBytesView.prefix(Self.preface.count)
        if !prefix.elementsEqual(Self.preface.prefix(prefix.count)) {
            self.decide(http2: false, context: context)
            self.leave(context: context)
        } else if prefix.count == Self.preface.count {
            self.decide(http2: true, context: context)
            self.leave(context: context)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent, !self.decided {
            // A graceful shutdown before any request came: nothing is under way, so the link ends.
            context.close(promise: nil)
            return
        }
        guard case .inputClosed = event as? ChannelEvent, !self.decided else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        // The host ended its side: whatever came is HTTP/1.1, and the handlers installed now
        // must hear the end too, so it is passed on before this handler leaves (a removed
        // handler's context passes nothing on).
        self.decide(http2: false, context: context)
        context.fireUserInboundEventTriggered(event)
        self.leave(context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        // Closed before a request came (a USB host that reset the gadget while enumerating, a
        // client that connected and left): nothing to serve. Handlers added now would never
        // hear that the channel is gone, and their link would wait forever.
        if !self.decided {
            self.decided = true
            self.promise.fail(ChannelError.inputClosed)
        }
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // Removed undecided (the session layer renewed the stream): nothing will be served.
        if !self.decided {
            self.decided = true
            self.promise.fail(ChannelError.inputClosed)
        }
    }

    private func decide(http2: Bool, context: ChannelHandlerContext) {
        guard !self.decided else { return }
        self.decided = true
        do {
            let negotiated: NegotiatedLink
            if http2 {
                negotiated = .http2(
                    try ResponderPipeline.configureHTTP2(context.channel, configuration: self.configuration)
                )
            } else {
                negotiated = .http1(try ResponderPipeline.configure(context.channel, configuration: self.configuration))
            }
            self.promise.succeed(negotiated)
        } catch {
            self.promise.fail(error)
            context.close(promise: nil)
            return
        }
        if self.seen.readableBytes > 0 {
            let seen = self.seen
            self.seen = ByteBuffer()
            context.fireChannelRead(self.wrapInboundOut(seen))
            context.fireChannelReadComplete()
        }
    }

    private func leave(context: ChannelHandlerContext) {
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
