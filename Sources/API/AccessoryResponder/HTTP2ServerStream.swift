import AccessoryHTTP2
import HTTPTypes
import NIOCore
import NIOHTTP2
import NIOHTTPTypes

/// One request stream of a frame-level HTTP/2 connection (``HTTP2ServerStreams``), on its event
/// loop: the request's parts as they arrive, for the stream's task, and its response written as
/// frames, with back-pressure. The event-loop half of an HTTP/2 ``ResponderLink``.
final class HTTP2ServerStream: ResponderLinkEnd {
    let id: HTTP2StreamID
    let eventLoop: any EventLoop
    /// The stream's receive window: topped up as the task takes the request body, so the host
    /// sends at most the window ahead of a handler that reads slowly.
    var window: InboundWindow
    /// Completes when the stream is over (closed both ways, reset, or the connection gone).
    var closedFuture: EventLoopFuture<Void> { self.closedPromise.futureResult }
    /// Nothing more is written on the stream.
    private(set) var isClosed = false

    private let streams: HTTP2ServerStreams
    private let closedPromise: EventLoopPromise<Void>
    private let waits = LinkWaits()
    private var headReceived = false
    /// The host ended its side (END_STREAM): the whole request is here or queued.
    private var requestEnded = false
    /// DATA bytes written on the stream whose write has not completed yet (they wait in
    /// NIOHTTP2Handler's buffer for flow-control credit, or in the socket's pending writes).
    private var bytesInFlight = 0
    private var writable = true
    /// The answer's last frame, once written (``resetAfterCompleteAnswer()``).
    private var answerWritten: EventLoopFuture<Void>?

    /// Bytes in flight at which the stream stops taking more, and at which it takes more again:
    /// a stream channel's watermarks (``HTTP2Windows/configuration(streamWindow:)``).
    static let highWatermark = 256 << 10
    static let lowWatermark = 64 << 10

    init(id: HTTP2StreamID, streams: HTTP2ServerStreams, eventLoop: any EventLoop, window: Int) {
        self.id = id
        self.streams = streams
        self.eventLoop = eventLoop
        self.window = InboundWindow(target: window)
        self.closedPromise = eventLoop.makePromise(of: Void.self)
    }

    // MARK: Frames from the host

    /// A frame the host sent on this stream.
    func receive(_ payload: HTTP2Frame.FramePayload) {
        switch payload {
        case .headers(let headers):
            if headers.endStream { self.window.closed = true }
            do {
                if self.headReceived {
                    self.deliver(.end(try HTTP2Fields.trailers(headers.headers, malformed: Self.malformed)))
                    self.requestEnded = true
                } else {
                    self.headReceived = true
                    self.deliver(.head(try HTTP2Fields.request(headers.headers, malformed: Self.malformed)))
                    if headers.endStream {
                        self.requestEnded = true
                        self.deliver(.end(nil))
                    }
                }
            } catch {
                self.waits.endInbound(.failure(error))
            }
        case .data(let data):
            guard case .byteBuffer(let buffer) = data.data, self.waits.inboundEnd == nil else { return }
            self.window.frameReceived(size: buffer.readableBytes)
            if buffer.readableBytes > 0 { self.deliver(.body(buffer)) }
            if data.endStream {
                self.window.closed = true
                self.requestEnded = true
                self.deliver(.end(nil))
            }
        default:
            // RST_STREAM arrives as a StreamClosedEvent too; WINDOW_UPDATE and PRIORITY are
            // NIOHTTP2Handler's.
            break
        }
    }

    /// The stream is over: closed both ways, reset (by the host, by NIOHTTP2Handler for an
    /// error, or by this side), or its connection gone. What the task waits for ends.
    func closed() {
        guard !self.isClosed else { return }
        self.isClosed = true
        self.window.closed = true
        self.waits.endInbound(.success(()))
        self.waits.resumeWritabilityWaiters(
            .failure(ResponderError(.connectionClosed, "the HTTP/2 stream closed while a response was being sent"))
        )
        self.closedPromise.succeed(())
    }

    /// An error of this stream (NIOHTTP2Handler names it): the request fails with it.
    func failed(_ error: any Error) {
        self.waits.endInbound(.failure(error))
    }

    // MARK: The stream's task (on the event loop)

    func takePart() -> LinkTaken {
        if let part = self.waits.takeQueued() {
            self.taken(part)
            return .part(part)
        }
        return self.waits.nothingQueued
    }

    func wait(_ waiter: LinkWaiter<HTTPRequestPart?>) {
        _ = self.waits.wait(waiter)
    }

    /// Writes `parts` as frames and flushes them: a message's end rides on the frame before it
    /// as END_STREAM when it can (HTTP/2 needs no frame of its own for it), trailer fields are
    /// a HEADERS frame of their own.
    func write(_ parts: some Sequence<HTTPResponsePart>) throws -> Bool {
        guard !self.isClosed else {
            throw ResponderError(.connectionClosed, "the HTTP/2 stream closed before the response could be sent")
        }
        var held: HTTP2Frame.FramePayload?
        var dataBytes = 0
        var ends = false
        for part in parts {
            let frame: HTTP2Frame.FramePayload
            switch part {
            case .head(let head):
                frame = .headers(.init(headers: HTTP2Fields.block(head)))
                if head.status.kind == .informational {
                    // Not a frame the end may ride on.
                    if let previous = held { self.streams.write(previous, on: self, promise: nil) }
                    self.streams.write(frame, on: self, promise: nil)
                    held = nil
                    continue
                }
            case .body(let buffer):
                dataBytes += buffer.readableBytes
                frame = .data(.init(data: .byteBuffer(buffer)))
            case .end(let trailers?):
                ends = true
                frame = .headers(.init(headers: HTTP2Fields.block(trailers), endStream: true))
            case .end(nil):
                ends = true
                if let previous = held, let ending = EndStreamCoalescer.ending(previous) {
                    held = ending
                    continue
                }
                frame = .data(.init(data: .byteBuffer(ByteBuffer()), endStream: true))
            }
            if let previous = held { self.streams.write(previous, on: self, promise: nil) }
            held = frame
        }
        guard let last = held else {
            self.streams.flush()
            return true
        }
        if ends {
            // The answer is whole once this frame is written; a request body still coming is
            // then refused without an error (``resetAfterCompleteAnswer()``).
            if !self.requestEnded {
                let written = self.eventLoop.makePromise(of: Void.self)
                self.answerWritten = written.futureResult
                self.streams.write(last, on: self, promise: written)
            } else {
                self.streams.write(last, on: self, promise: nil)
            }
            self.streams.flush()
            // Nothing more goes on this stream: no reason to wait for its bytes to leave.
            return true
        }
        guard dataBytes > 0 else {
            self.streams.write(last, on: self, promise: nil)
            self.streams.flush()
            return !self.isClosed && self.writable
        }
        self.bytesInFlight += dataBytes
        let written = self.eventLoop.makePromise(of: Void.self)
        written.futureResult.assumeIsolated().whenComplete { _ in self.leftTheStream(dataBytes) }
        self.streams.write(last, on: self, promise: written)
        self.streams.flush()
        if self.bytesInFlight >= Self.highWatermark { self.writable = false }
        return !self.isClosed && self.writable
    }

    func waitForWritability(_ waiter: LinkWaiter<Void>) {
        if self.isClosed {
            waiter.resume(
                with: .failure(
                    ResponderError(.connectionClosed, "the HTTP/2 stream closed while a response was being sent")
                )
            )
        } else if self.writable {
            waiter.resume(with: .success(()))
        } else {
            self.waits.waitForWritability(waiter)
        }
    }

    func cancelPartWaiter() {
        self.waits.cancelPartWaiter()
    }

    func cancelWritabilityWaiters() {
        self.waits.resumeWritabilityWaiters(.failure(CancellationError()))
    }

    /// RST_STREAM NO_ERROR once the answer went out whole, if the host is still sending the
    /// request body: its cue to stop without an error (RFC 9113 §8.1). Only after the answer's
    /// last frame was written: NIOHTTP2Handler drops a stream's frames still waiting in its
    /// buffer when the stream is reset, and the host would get a cut-off answer. Nothing waits
    /// for it: an answer held back by the host's flow control (a host that went away) must not
    /// hold the stream's task, which the next session waits for.
    func resetAfterCompleteAnswer() {
        guard !self.requestEnded, let answerWritten = self.answerWritten else { return }
        answerWritten.assumeIsolated().whenSuccess {
            self.streams.reset(self, reason: .noError)
        }
    }

    /// The link's task is done with the stream: one not yet over both ways is reset (CANCEL).
    func close() {
        self.streams.reset(self, reason: .cancel)
    }

    // MARK: Helpers

    private func deliver(_ part: HTTPRequestPart) {
        if self.waits.arrived(part) { self.taken(part) }
    }

    /// The task took `part`: a body's bytes may be sent again.
    private func taken(_ part: HTTPRequestPart) {
        if case .body(let buffer) = part { self.streams.credit(buffer.readableBytes, to: self) }
    }

    private func leftTheStream(_ count: Int) {
        self.bytesInFlight -= count
        guard !self.writable, self.bytesInFlight <= Self.lowWatermark, !self.isClosed else { return }
        self.writable = true
        self.waits.resumeWritabilityWaiters(.success(()))
    }

    private static func malformed(_ what: String) -> any Error {
        ResponderError(.malformedRequest, "the host sent \(what) on an HTTP/2 stream")
    }
}

@available(*, unavailable)
extension HTTP2ServerStream: Sendable {}
