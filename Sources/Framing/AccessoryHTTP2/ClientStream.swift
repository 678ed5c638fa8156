import AccessoryHTTP1
import NIOCore
import NIOHTTP2

/// One exchange's stream on a frame-level connection (``HTTP2ClientStreams``), on its event loop:
/// the response as it arrives, its receive window, and whether it was reset.
final class ClientStream: ResponseBatches.Owner {
    let id: HTTP2StreamID
    let batches: ResponseBatches
    var window: InboundWindow
    /// The exchange (or the link for it) reset the stream: nothing more is written on it.
    var isReset = false
    var inReadList = false
    /// The device's GOAWAY left this stream out: it was not processed.
    var refusedByGoAway = false
    /// NIOHTTP2Handler reset this stream for an error in a frame the device sent on it.
    var resetByHandler = false
    private var finalHeadArrived = false
    private let streams: HTTP2ClientStreams

    init(id: HTTP2StreamID, streams: HTTP2ClientStreams, batches: ResponseBatches, window: InboundWindow) {
        self.id = id
        self.streams = streams
        self.batches = batches
        self.window = window
        batches.owner = self
    }

    /// A frame the device sent on this stream.
    func receive(_ payload: HTTP2Frame.FramePayload) {
        switch payload {
        case .headers(let headers):
            do {
                if self.finalHeadArrived {
                    self.batches.append(.end(try HTTP2Fields.trailers(headers.headers)))
                } else {
                    let head = try HTTP2Fields.response(headers.headers)
                    self.finalHeadArrived = head.status.kind != .informational
                    self.batches.append(.head(head))
                    if headers.endStream { self.batches.append(.end(nil)) }
                }
            } catch {
                self.batches.end(.failed(error))
                self.streams.reset(self)
            }
            if headers.endStream { self.window.closed = true }
        case .data(let data):
            guard case .byteBuffer(let buffer) = data.data else { return }
            self.window.frameReceived(size: buffer.readableBytes)
            if buffer.readableBytes > 0 { self.batches.append(.body(buffer)) }
            if data.endStream {
                self.window.closed = true
                self.batches.append(.end(nil))
            }
        default:
            // RST_STREAM also arrives as a StreamClosedEvent; WINDOW_UPDATE and PRIORITY are
            // NIOHTTP2Handler's.
            break
        }
    }

    /// The stream closed: cleanly, or reset with `reason` (by the device, or by NIOHTTP2Handler
    /// for a stream error).
    func closed(reason: NIOHTTP2.HTTP2ErrorCode?) {
        self.window.closed = true
        if self.refusedByGoAway {
            self.batches.end(
                .failed(HTTP2StreamsRefused(reason: "the device sent GOAWAY before it processed stream \(self.id)"))
            )
        } else if let reason {
            self.batches.end(.failed(NIOHTTP2Errors.streamClosed(streamID: self.id, errorCode: reason)))
        } else {
            self.batches.end(.closed)
        }
    }

    func resetStream() {
        self.streams.reset(self)
    }

    func bodyBytesTaken(_ count: Int) {
        self.streams.credit(count, to: self)
    }

    func waitTimedOut() {
        self.streams.streamWentIdle(after: self.batches.idleTimeout)
    }
}

@available(*, unavailable)
extension ClientStream: Sendable {}
