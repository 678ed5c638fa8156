import NIOCore
import NIOHTTP2

/// Ends an HTTP/2 connection once its streams are over, when one of two things asks it to:
///
/// - The host stopped sending (its end of the byte stream closed: `ChannelEvent.inputClosed`).
///   Without this the connection would wait for streams that can never come, and the link
///   would stay open for good. Found by the `request` fuzz target: the preface and a SETTINGS
///   frame, then the end of input.
/// - A graceful shutdown began (`ChannelShouldQuiesceEvent`, from ``ResponderShutdown``): it
///   sends GOAWAY with the last stream it took (RFC 9113 §6.8), so the host sends later
///   requests elsewhere or after the device is back.
///
/// It closes once no stream is open, or after a bound if some still are (a stream whose answer
/// needs the host's WINDOW_UPDATEs may never finish). Before closing it writes a last GOAWAY and
/// waits for that write to leave (at most the same bound): NIO's close drops writes still
/// pending, and NIOHTTP2Handler reports a stream closed once its last frame left the handler,
/// not once its bytes left the process, so a close at once could cut an answer's tail.
///
/// It sits above ``HTTP2ServerStreams`` and counts the streams from the events NIOHTTP2Handler
/// (made without a multiplexer) sends up the pipeline. With a multiplexer it would tell only its
/// stream delegate: before 2026-11-30 a handler here counted pipeline events that never came,
/// and so closed at once with streams still open (a host that half-closed after its request got
/// no answer).
final class HTTP2ConnectionEnd: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = Any
    typealias OutboundIn = Any
    typealias OutboundOut = HTTP2Frame

    private let inputEndBound: TimeAmount
    private let shutdownBound: TimeAmount
    private var openStreams = 0
    /// The highest stream the host opened: what GOAWAY names as the last one taken.
    private var lastStream = HTTP2StreamID.rootStream
    private var endAsked = false
    private var closing = false
    private var timer: Scheduled<Void>?
    /// How long the last GOAWAY may take to leave once the streams are over.
    private var flushBound: TimeAmount
    private var context: ChannelHandlerContext?

    init(inputEndBound: TimeAmount = .seconds(2), shutdownBound: TimeAmount) {
        self.inputEndBound = inputEndBound
        self.shutdownBound = shutdownBound
        self.flushBound = inputEndBound
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        self.context = nil
    }

    /// A stream opened.
    private func streamOpened(_ id: HTTP2StreamID) {
        self.openStreams += 1
        self.lastStream = max(self.lastStream, id)
    }

    /// A stream closed. NIOHTTP2Handler tells once the stream's last frame was written below it
    /// (perhaps not flushed yet: the last GOAWAY flushes it).
    private func streamClosed() {
        self.openStreams = max(0, self.openStreams - 1)
        if self.endAsked && self.openStreams == 0, let context = self.context {
            self.close(context: context, flushWithin: self.flushBound)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let created = event as? NIOHTTP2StreamCreatedEvent {
            self.streamOpened(created.streamID)
        } else if event is StreamClosedEvent {
            self.streamClosed()
        } else if case .inputClosed = event as? ChannelEvent {
            self.askToEnd(context: context, within: self.inputEndBound)
        } else if event is ChannelShouldQuiesceEvent {
            // Taken here: below, nothing else would act on it, and the HTTP/1.1 handlers a
            // renewed stream may get later must not see it twice.
            if !self.endAsked && !self.closing {
                context.writeAndFlush(self.wrapOutboundOut(self.goAway()), promise: nil)
            }
            self.askToEnd(context: context, within: self.shutdownBound)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        context.fireChannelInactive()
    }

    private func askToEnd(context: ChannelHandlerContext, within bound: TimeAmount) {
        guard !self.closing else { return }
        self.endAsked = true
        if self.openStreams == 0 {
            self.close(context: context, flushWithin: bound)
        } else if self.timer == nil {
            self.flushBound = bound
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            self.timer = context.eventLoop.scheduleTask(in: bound) {
                let (handler, context) = loopBound.value
                handler.close(context: context, flushWithin: bound)
            }
        }
    }

    /// The last GOAWAY, then the close once its bytes left (or `bound` passed: a host that no
    /// longer reads).
    private func close(context: ChannelHandlerContext, flushWithin bound: TimeAmount) {
        guard !self.closing else { return }
        self.closing = true
        self.timer?.cancel()
        self.timer = nil
        let written = context.eventLoop.makePromise(of: Void.self)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let deadline = context.eventLoop.scheduleTask(in: bound) {
            written.fail(ChannelError.ioOnClosedChannel)
        }
        written.futureResult.whenComplete { _ in
            deadline.cancel()
            loopBound.value.close(promise: nil)
        }
        context.writeAndFlush(self.wrapOutboundOut(self.goAway()), promise: written)
    }

    private func goAway() -> HTTP2Frame {
        HTTP2Frame(
            streamID: .rootStream,
            payload: .goAway(lastStreamID: self.lastStream, errorCode: .noError, opaqueData: nil)
        )
    }
}

@available(*, unavailable)
extension HTTP2ConnectionEnd: Sendable {}
