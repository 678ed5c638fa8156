import AccessoryHTTP2
import AccessorySession
import NIOCore
import NIOHTTP2

/// The request streams of one HTTP/2 connection, kept as frames: the handler after a
/// `NIOHTTP2Handler` made without a stream multiplexer. Each stream the host opens becomes an
/// ``HTTP2ServerStream`` and a ``ResponderLink`` handed to the connection's serving task; the
/// frames it receives go to their stream; it returns flow-control credit (WINDOW_UPDATE) for the
/// connection as frames arrive and for a stream as its task takes the request body.
///
/// Why not swift-nio-http2's stream channels: a channel, its pipeline, the HTTP-types codec and
/// an async sequence's hand-off built and torn down per request were most of what the responder
/// spent on an HTTP/2 `/status` above the frames themselves (docs/performance.md); the client
/// side made the same change first (``HTTP2ClientStreams`` in AccessoryHTTP2).
///
/// `NIOHTTP2Handler` keeps the protocol's rules: stream states, header block and content-length
/// validation, outbound flow control and MAX_CONCURRENT_STREAMS, PING and SETTINGS
/// acknowledgements. It tells the pipeline of streams opening and closing
/// (`NIOHTTP2StreamCreatedEvent`, `StreamClosedEvent`); these go on to ``HTTP2ConnectionEnd``.
/// Every method runs on the connection's event loop.
final class HTTP2ServerStreams: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private var context: ChannelHandlerContext?
    private var streams: [HTTP2StreamID: HTTP2ServerStream] = [:]
    /// The highest stream the host opened; a HEADERS frame above it opens the next.
    private var lastStreamID = HTTP2StreamID.rootStream
    private var connectionWindow: InboundWindow
    private var initialStreamWindow = InitialStreamWindow()
    /// Starts a stream's task; until the serving task sets it, new streams wait in `unserved`.
    private var serveStream: ((ResponderLink) -> Void)?
    private var unserved: [ResponderLink] = []
    private let endedPromise: EventLoopPromise<Void>
    private var gone = false

    /// - Parameter connectionWindow: the connection's receive window, kept topped up to it. A
    ///   stream's is the SETTINGS_INITIAL_WINDOW_SIZE announced, once the host has it.
    init(eventLoop: any EventLoop, connectionWindow: Int) {
        self.connectionWindow = InboundWindow(target: connectionWindow)
        self.endedPromise = eventLoop.makePromise(of: Void.self)
    }

    /// Serves every stream, those that opened already and those to come, with `serveStream`
    /// (called on the event loop); the future completes when the connection is over (closed,
    /// its handlers removed, or the session below ended it).
    func serve(_ serveStream: @escaping (ResponderLink) -> Void) -> EventLoopFuture<Void> {
        let waiting = self.unserved
        self.unserved = []
        if !self.gone {
            self.serveStream = serveStream
            for link in waiting { serveStream(link) }
        }
        return self.endedPromise.futureResult
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.connectionGone()
        self.context = nil
    }

    // MARK: Streams (on the event loop)

    /// Writes one frame of `stream`'s response, unless the stream is over.
    func write(_ payload: HTTP2Frame.FramePayload, on stream: HTTP2ServerStream, promise: EventLoopPromise<Void>?) {
        guard let context = self.context, self.streams[stream.id] === stream else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        context.write(self.wrapOutboundOut(HTTP2Frame(streamID: stream.id, payload: payload)), promise: promise)
    }

    func flush() {
        self.context?.flush()
    }

    /// Resets `stream` with `reason` unless it is over already; its late frames are dropped.
    func reset(_ stream: HTTP2ServerStream, reason: HTTP2ErrorCode) {
        guard self.streams[stream.id] === stream, let context = self.context else { return }
        self.streams[stream.id] = nil
        stream.closed()
        context.writeAndFlush(
            self.wrapOutboundOut(HTTP2Frame(streamID: stream.id, payload: .rstStream(reason))),
            promise: nil
        )
    }

    /// The stream's task took `count` body bytes: the host may send that much more.
    func credit(_ count: Int, to stream: HTTP2ServerStream) {
        guard self.streams[stream.id] === stream, let increment = stream.window.frameEmitted(size: count) else {
            return
        }
        self.writeWindowUpdate(increment, for: stream.id)
    }

    // MARK: The connection's inbound side

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        guard frame.streamID != .rootStream else { return }
        if let stream = self.streams[frame.streamID] {
            stream.receive(frame.payload)
            return
        }
        // A new stream opens with HEADERS on a higher ID (NIOHTTP2Handler has checked it);
        // anything else is a late frame of a stream that is over here.
        guard case .headers = frame.payload, frame.streamID > self.lastStreamID, !self.gone else { return }
        self.lastStreamID = frame.streamID
        let stream = HTTP2ServerStream(
            id: frame.streamID,
            streams: self,
            eventLoop: context.eventLoop,
            window: self.initialStreamWindow.size
        )
        self.streams[frame.streamID] = stream
        stream.receive(frame.payload)
        let link = ResponderLink(stream: stream)
        if let serveStream = self.serveStream {
            serveStream(link)
        } else {
            self.unserved.append(link)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let closed as StreamClosedEvent:
            self.streams.removeValue(forKey: closed.streamID)?.closed()
        case let updated as NIOHTTP2WindowUpdatedEvent:
            if let size = updated.inboundWindowSize {
                if updated.streamID == .rootStream {
                    if let increment = self.connectionWindow.newWindowSize(size) {
                        self.writeWindowUpdate(increment, for: .rootStream)
                    }
                } else if let stream = self.streams[updated.streamID],
                    let increment = stream.window.newWindowSize(size)
                {
                    self.writeWindowUpdate(increment, for: stream.id)
                }
            }
        case let changed as NIOHTTP2BulkStreamWindowChangeEvent:
            self.initialStreamWindow.changed(by: changed.delta)
            for stream in self.streams.values {
                if let increment = stream.window.initialWindowSizeChanged(delta: changed.delta) {
                    self.writeWindowUpdate(increment, for: stream.id)
                }
            }
        case is SessionStreamEnded:
            // The session layer ended the byte stream under this connection (a new HELLO, the
            // host's CLOSE): every stream is over, nothing more is written for them.
            self.connectionGone()
        default:
            break
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// An error of one stream fails that stream's request; a connection error goes on (after it
    /// NIOHTTP2Handler sends GOAWAY and the connection closes).
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let streamError = error as? NIOHTTP2Errors.StreamError {
            self.streams[streamError.streamID]?.failed(streamError.baseError)
            return
        }
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.connectionGone()
        context.fireChannelInactive()
    }

    private func connectionGone() {
        guard !self.gone else { return }
        self.gone = true
        self.serveStream = nil
        self.unserved = []
        let streams = self.streams.values
        self.streams.removeAll()
        for stream in streams { stream.closed() }
        self.endedPromise.succeed(())
    }

    /// Writes a WINDOW_UPDATE and flushes it at once, as swift-nio-http2's stream channels do:
    /// a control frame left unflushed in NIOHTTP2Handler's buffer while the channel is not
    /// writable trips its ordering assertion when the channel becomes writable again.
    private func writeWindowUpdate(_ increment: Int, for id: HTTP2StreamID) {
        guard let context = self.context else { return }
        let frame = HTTP2Frame(streamID: id, payload: .windowUpdate(windowSizeIncrement: increment))
        context.writeAndFlush(self.wrapOutboundOut(frame), promise: nil)
    }
}

@available(*, unavailable)
extension HTTP2ServerStreams: Sendable {}
