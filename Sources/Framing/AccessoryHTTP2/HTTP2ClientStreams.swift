import AccessoryHTTP1
import HTTPTypes
import NIOCore
import NIOHTTP2
import NIOHTTPTypes

/// The client streams of one HTTP/2 connection, kept as frames: the handler after a
/// `NIOHTTP2Handler` made without a stream multiplexer. It sends each exchange's request as
/// frames on a stream ID of its own, sorts the frames it receives by stream ID into each
/// exchange's ``ResponseBatches``, and returns flow-control credit (WINDOW_UPDATE) for the
/// connection as frames arrive and for a stream as its exchange takes them.
///
/// Why not swift-nio-http2's stream channels: a channel, its pipeline and the HTTP-types codec
/// built and torn down per exchange were most of an HTTP/2 `/status` exchange's CPU time, above
/// the frames themselves (docs/performance.md). A link that decodes compressed responses still
/// uses them: NIO's decompressor is a channel handler.
///
/// `NIOHTTP2Handler` keeps the protocol's rules: stream states, header block and content-length
/// validation, outbound flow control and MAX_CONCURRENT_STREAMS (it holds frames until they
/// may go), PING and SETTINGS acknowledgements. Every method runs on the connection's event loop.
final class HTTP2ClientStreams: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private var context: ChannelHandlerContext?
    private var streams: [HTTP2StreamID: ClientStream] = [:]
    /// Streams that received something in the current read: handed over at its end.
    private var readStreams: [ClientStream] = []
    /// Where the body bytes of exchanges on other executors are gathered at each read's end.
    private var bodyPool = BodyBufferPool()
    private var nextStreamID: Int32
    private var connectionWindow: InboundWindow
    /// The window a new stream starts with: the one announced, once the device has it.
    private var initialStreamWindow = InitialStreamWindow()
    /// Why no new stream may open here: the connection closed, the device sent GOAWAY, or the
    /// stream IDs ran out. The link opens another connection, and this one closes once its last
    /// stream is over.
    private var refusal: String?
    /// An error NIOHTTP2Handler reported without naming a stream, in the current read: a stream's
    /// (the handler resets that stream, and when the reset waited in its buffer, the
    /// StreamClosedEvent comes after the error and takes it), or the connection's (the handler
    /// sends GOAWAY: ``wroteFrame(_:)``; the streams fail with it when the connection goes).
    private var unclaimedError: (any Error)?
    /// NIOHTTP2Handler sent GOAWAY (a connection error): the connection is closing.
    private var goAwaySent = false
    /// The error that ended the connection, its streams' error.
    private var connectionError: (any Error)?
    /// Streams reset with a reason and no error before it, ended on the next tick: when
    /// NIOHTTP2Handler resets a stream for an error in a received frame and writes the reset at
    /// once, the StreamClosedEvent comes before the error, which then names the cause (a reset
    /// the device sent is ended the same way, with no cause to wait for).
    private var resetsAwaitingCause: [(stream: ClientStream, reason: NIOHTTP2.HTTP2ErrorCode, cause: (any Error)?)] = []
    /// Ends the connection's byte stream when the connection is done: in band when a session
    /// layer is below, else by closing the channel. Set by the link's pipeline set-up.
    var streamEnd: HTTP2StreamEnd?
    /// Whether the device's HTTP/2 side still answers (``ConnectionLiveness``).
    private let liveness = LivenessCheck()

    /// - Parameters:
    ///   - connectionWindow: the connection's receive window, kept topped up to it.
    ///   - firstStreamID: the first stream's ID (odd; a test starts near the end of the range).
    init(connectionWindow: Int, firstStreamID: Int32 = 1) {
        self.connectionWindow = InboundWindow(target: connectionWindow)
        self.nextStreamID = firstStreamID
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.liveness.stop()
        self.connectionGone(.closed)
        self.context = nil
        self.streamEnd = nil
    }

    // MARK: Exchanges (on the event loop)

    /// A new stream for one exchange, which must write its request head at once (stream IDs go
    /// out in the order they were taken).
    ///
    /// - Throws: `HTTP2StreamsRefused` when this connection takes no new stream.
    func openStream(idleTimeout: Duration, deadline: StreamDeadline?, gathersBody: Bool = false) throws -> ClientStream
    {
        if let refusal = self.refusal { throw HTTP2StreamsRefused(reason: refusal) }
        guard let context = self.context else { throw HTTP2StreamsRefused(reason: "the connection closed") }
        let id = HTTP2StreamID(self.nextStreamID)
        if self.nextStreamID > Int32.max - 2 {
            self.refusal = "its stream IDs ran out"
        } else {
            self.nextStreamID += 2
        }
        let batches = ResponseBatches(eventLoop: context.eventLoop, idleTimeout: idleTimeout, deadline: deadline)
        batches.gathersBody = gathersBody
        let stream = ClientStream(
            id: id,
            streams: self,
            batches: batches,
            window: InboundWindow(target: self.initialStreamWindow.size)
        )
        self.streams[id] = stream
        return stream
    }

    /// Writes one frame of `stream`'s request; `flush` sends what was written.
    func write(
        _ payload: HTTP2Frame.FramePayload,
        on stream: ClientStream,
        flush: Bool,
        promise: EventLoopPromise<Void>?
    ) {
        guard let context = self.context, !stream.isReset else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        context.write(self.wrapOutboundOut(HTTP2Frame(streamID: stream.id, payload: payload)), promise: promise)
        if flush { context.flush() }
    }

    /// Resets `stream` (RST_STREAM CANCEL) unless it closed already; its late frames are dropped.
    func reset(_ stream: ClientStream) {
        guard !stream.isReset else { return }
        stream.isReset = true
        stream.window.closed = true
        guard self.streams[stream.id] === stream, let context = self.context else { return }
        self.streams[stream.id] = nil
        if self.streams.isEmpty { self.bodyPool.release() }
        context.writeAndFlush(
            self.wrapOutboundOut(HTTP2Frame(streamID: stream.id, payload: .rstStream(.cancel))),
            promise: nil
        )
        self.closeIfRetired()
    }

    /// The exchange is over: its timers stop, and a stream still open is reset.
    func release(_ stream: ClientStream) {
        stream.batches.stop()
        self.reset(stream)
    }

    /// A stream's exchange waited `idleTimeout` for the device in vain (the stream is reset). When
    /// the device sent nothing on the whole connection for that long either, a PING asks whether
    /// its HTTP/2 side lives (``ConnectionLiveness``); without an acknowledgement within half of
    /// `idleTimeout` the connection is given up, as an HTTP/1.1 link reopens after an idle
    /// timeout: its streams end with ``HTTP2ConnectionSilence`` (an idempotent request without
    /// a response byte goes out again on the next connection), and the next connection starts
    /// on a new session in band when a session layer is below. Before, each stream timed out in
    /// turn on a connection that was never given up.
    func streamWentIdle(after idleTimeout: Duration) {
        guard let context = self.context else { return }
        self.liveness.streamWentIdle(after: idleTimeout, context: context) { silence in
            if self.refusal == nil { self.refusal = "the device's HTTP/2 side stopped answering" }
            // The streams' error whichever way the connection goes (a read before the close
            // would clear an unclaimed one).
            self.connectionError = silence
            if let streamEnd = self.streamEnd {
                streamEnd.giveUp(silence)
            } else if let context = self.context {
                context.close(promise: nil)
            }
        }
    }

    /// The exchange took `count` body bytes of `stream`: the device may send that much more.
    func credit(_ count: Int, to stream: ClientStream) {
        guard self.streams[stream.id] === stream, let increment = stream.window.frameEmitted(size: count) else {
            return
        }
        self.writeWindowUpdate(increment, for: stream.id)
    }

    // MARK: The connection's inbound side

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        guard frame.streamID != .rootStream else {
            self.liveness.received(frame)
            if case .goAway(let lastStreamID, _, _) = frame.payload {
                // The streams above its last stream ID were not processed; NIOHTTP2Handler closes
                // them next (StreamClosedEvent), and their exchanges may send them again.
                for (id, stream) in self.streams where id > lastStreamID { stream.refusedByGoAway = true }
                if self.refusal == nil { self.refusal = "the device sent GOAWAY" }
                self.closeIfRetired()
            }
            return
        }
        // A frame of a stream that is no longer here (reset by the exchange) is dropped.
        guard let stream = self.streams[frame.streamID] else { return }
        stream.receive(frame.payload)
        if !stream.inReadList {
            stream.inReadList = true
            self.readStreams.append(stream)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // NIOHTTP2Handler has sent what it buffered in this read (its resets included) by now.
        self.unclaimedError = nil
        self.liveness.readCompleted()
        let streams = self.readStreams
        self.readStreams.removeAll(keepingCapacity: true)
        for stream in streams {
            stream.inReadList = false
            stream.batches.gatherBody(using: &self.bodyPool)
            stream.batches.handOver()
        }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let closed as StreamClosedEvent:
            // A reset that follows an unclaimed error is that error's stream (ours or not).
            let error = closed.reason == nil ? nil : self.unclaimedError
            if error != nil { self.unclaimedError = nil }
            if let stream = self.streams.removeValue(forKey: closed.streamID) {
                if self.streams.isEmpty { self.bodyPool.release() }
                if let error {
                    stream.window.closed = true
                    stream.batches.end(.failed(error))
                } else if let reason = closed.reason, !stream.refusedByGoAway {
                    self.endOnTheNextTick(stream, reason: reason, context: context)
                } else {
                    stream.closed(reason: closed.reason)
                }
                self.closeIfRetired()
            }
        case let updated as NIOHTTP2WindowUpdatedEvent:
            guard let size = updated.inboundWindowSize else { break }
            if updated.streamID == .rootStream {
                if let increment = self.connectionWindow.newWindowSize(size) {
                    self.writeWindowUpdate(increment, for: .rootStream)
                }
            } else if let stream = self.streams[updated.streamID], let increment = stream.window.newWindowSize(size) {
                self.writeWindowUpdate(increment, for: stream.id)
            }
        case let changed as NIOHTTP2BulkStreamWindowChangeEvent:
            self.initialStreamWindow.changed(by: changed.delta)
            for stream in self.streams.values {
                if let increment = stream.window.initialWindowSizeChanged(delta: changed.delta) {
                    self.writeWindowUpdate(increment, for: stream.id)
                }
            }
        default:
            break
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// An error of one stream fails that stream, never the others. NIOHTTP2Handler names the
    /// stream of an error in a write (`StreamError`); one in a received frame it reports bare and
    /// resets that stream: when the reset waited in its buffer, the StreamClosedEvent comes after
    /// the error and takes it (``unclaimedError``, also kept for the connection's end in the same
    /// read); when the reset went out at once, the event came first and the stream waits a tick
    /// for the error (``resetsAwaitingCause``). Either way the caller learns what was wrong, not
    /// that the device reset the stream.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let streamError = error as? NIOHTTP2Errors.StreamError {
            self.streams[streamError.streamID]?.batches.end(.failed(streamError.baseError))
            return
        }
        // The handler reports a connection error just after its GOAWAY.
        if self.goAwaySent {
            if self.connectionError == nil { self.connectionError = error }
        } else if let last = self.resetsAwaitingCause.lastIndex(where: { $0.stream.resetByHandler && $0.cause == nil })
        {
            // The stream the handler just reset, whose StreamClosedEvent came first.
            self.resetsAwaitingCause[last].cause = error
            return
        }
        self.unclaimedError = error
    }

    /// Ends `stream`, reset with `reason`, on the next tick, with the error NIOHTTP2Handler
    /// reports after its own reset if one comes (``resetsAwaitingCause``).
    private func endOnTheNextTick(
        _ stream: ClientStream,
        reason: NIOHTTP2.HTTP2ErrorCode,
        context: ChannelHandlerContext
    ) {
        stream.window.closed = true
        self.resetsAwaitingCause.append((stream, reason, nil))
        guard self.resetsAwaitingCause.count == 1 else { return }
        context.eventLoop.assumeIsolated().execute {
            let resets = self.resetsAwaitingCause
            self.resetsAwaitingCause.removeAll()
            for (stream, reason, cause) in resets {
                if let cause {
                    stream.batches.end(.failed(cause))
                } else {
                    stream.closed(reason: reason)
                }
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.connectionGone(.closed)
        context.fireChannelInactive()
    }

    private func connectionGone(_ closed: ResponseBatches.Ending) {
        if self.refusal == nil { self.refusal = "the connection closed" }
        let ending = (self.connectionError ?? self.unclaimedError).map { ResponseBatches.Ending.failed($0) } ?? closed
        self.unclaimedError = nil
        let streams = self.streams.values
        self.streams.removeAll()
        // A read the close cut short leaves its streams here (each holds this handler: a cycle).
        for stream in self.readStreams { stream.inReadList = false }
        self.readStreams.removeAll()
        for stream in streams {
            stream.window.closed = true
            stream.batches.end(ending)
        }
    }

    /// A connection that takes no new stream closes when its last stream is over.
    private func closeIfRetired() {
        guard self.refusal != nil, self.streams.isEmpty, let context = self.context else { return }
        self.endConnection(context: context)
    }

    /// Ends the connection: its byte stream is given up in band when it can be (the next request
    /// starts a new session on the same transport), else the channel closes.
    private func endConnection(context: ChannelHandlerContext) {
        if let streamEnd = self.streamEnd {
            streamEnd.end()
        } else {
            context.close(promise: nil)
        }
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

extension HTTP2ClientStreams: NIOHTTP2FrameDelegate {
    /// Sees every frame NIOHTTP2Handler writes. A link never sends GOAWAY itself: one written is
    /// the handler's answer to a connection error, after which the connection takes no stream.
    /// It ends (on the next tick, outside the handler's write), its streams failing with the
    /// error, and the next request opens another connection (on a new session in band, when a
    /// session layer is below).
    func wroteFrame(_ frame: HTTP2Frame) {
        if case .rstStream = frame.payload {
            // Not the exchange's own reset (``reset(_:)`` forgets the stream first): the
            // handler's, for an error in what the device sent on it.
            if let stream = self.streams[frame.streamID] {
                stream.resetByHandler = true
            } else if let awaiting = self.resetsAwaitingCause.last(where: { $0.stream.id == frame.streamID }) {
                awaiting.stream.resetByHandler = true
            }
            return
        }
        guard case .goAway = frame.payload, let context = self.context else { return }
        self.goAwaySent = true
        if self.refusal == nil { self.refusal = "the connection failed" }
        context.eventLoop.assumeIsolated().execute {
            guard let context = self.context else { return }
            self.endConnection(context: context)
        }
    }
}

@available(*, unavailable)
extension HTTP2ClientStreams: Sendable {}

/// A connection that takes no new stream; the link opens another.
struct HTTP2StreamsRefused: Error, CustomStringConvertible {
    let reason: String
    var description: String { "the HTTP/2 connection takes no new stream: \(self.reason)" }
}
