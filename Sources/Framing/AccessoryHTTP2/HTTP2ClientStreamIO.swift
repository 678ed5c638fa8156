import AccessoryHTTP1
import HTTPTypes
import NIOCore
import NIOHTTP2
import NIOHTTPTypes

/// How an exchange reaches its stream, from any executor: a frame-level stream of
/// ``HTTP2ClientStreams`` (``FrameStreamIO``), or a stream channel when the link decodes
/// compressed responses (``StreamChannelIO``).
protocol HTTP2ClientStreamIO: Sendable {
    var eventLoop: any EventLoop { get }
    /// The stream's response side, reached on ``eventLoop`` only.
    var batches: NIOLoopBound<ResponseBatches> { get }
    /// Whether the whole response arrived (``ResponseBatches/arrival``), from any thread.
    var arrival: ResponseArrival { get }
    /// Writes `parts` and flushes them, without waiting.
    func send(_ parts: [HTTPRequestPart])
    /// Writes one part and waits until the stream took it, at most the link's idle bound (see
    /// ``ResponseBatches/boundRequestWrite(_:reporting:)``).
    func sendWaiting(_ part: HTTPRequestPart) async throws
    /// The exchange is over: a stream that has not ended both ways is reset.
    func close()
}

extension HTTP2ClientStreamIO {
    /// Runs `write` on the event loop with a promise for its completion, and waits for that
    /// completion, bounded by the stream's idle bound.
    func waitBounded(_ write: @escaping @Sendable (EventLoopPromise<Void>) -> Void) async throws {
        let written = self.eventLoop.makePromise(of: Void.self)
        let bounded = self.eventLoop.makePromise(of: Void.self)
        let batches = self.batches
        let start: @Sendable () -> Void = {
            write(written)
            batches.value.boundRequestWrite(written.futureResult, reporting: bounded)
        }
        if self.eventLoop.inEventLoop { start() } else { self.eventLoop.execute(start) }
        // A cancelled caller stops waiting at once (the exchange then resets the stream); a write
        // the device never makes room for would otherwise hold it until the idle bound.
        try await withTaskCancellationHandler {
            try await bounded.futureResult.get()
        } onCancel: {
            bounded.fail(HTTPLinkError(.cancelled, "the request was cancelled while its body was going out"))
        }
    }
}

/// An exchange's stream on a frame-level connection.
struct FrameStreamIO: HTTP2ClientStreamIO {
    let eventLoop: any EventLoop
    let batches: NIOLoopBound<ResponseBatches>
    let arrival: ResponseArrival
    private let stream: NIOLoopBound<ClientStream>
    private let streams: NIOLoopBound<HTTP2ClientStreams>

    /// Opens a stream and writes `first` on it in the same event-loop turn (stream IDs must go
    /// out in the order they were taken). On `streams`' event loop.
    static func open(
        on streams: NIOLoopBound<HTTP2ClientStreams>,
        idleTimeout: Duration,
        deadline: StreamDeadline?,
        first: [HTTPRequestPart],
        exchangeOffLoop: Bool = false
    ) throws -> FrameStreamIO {
        let stream = try streams.value.openStream(
            idleTimeout: idleTimeout,
            deadline: deadline,
            gathersBody: exchangeOffLoop
        )
        let eventLoop = streams.eventLoop
        let io = FrameStreamIO(
            eventLoop: eventLoop,
            batches: NIOLoopBound(stream.batches, eventLoop: eventLoop),
            arrival: stream.batches.arrival,
            stream: NIOLoopBound(stream, eventLoop: eventLoop),
            streams: streams
        )
        io.write(first, promise: nil)
        return io
    }

    func send(_ parts: [HTTPRequestPart]) {
        if self.eventLoop.inEventLoop {
            self.write(parts, promise: nil)
        } else {
            self.eventLoop.execute { self.write(parts, promise: nil) }
        }
    }

    func sendWaiting(_ part: HTTPRequestPart) async throws {
        try await self.waitBounded { self.write([part], promise: $0) }
    }

    func close() {
        if self.eventLoop.inEventLoop {
            self.streams.value.release(self.stream.value)
        } else {
            self.eventLoop.execute { self.streams.value.release(self.stream.value) }
        }
    }

    /// The frames of `parts`, the last one flushed with `promise`: a message's end rides on the
    /// frame before it as END_STREAM (HTTP/2 needs no frame of its own for it), and trailer
    /// fields are a HEADERS frame of their own. A large body goes in slices, each of which, once
    /// written, tells the stream's batches that the request moved on (the last one too: from
    /// then on the device has the whole idle bound to begin its answer).
    private func write(_ parts: [HTTPRequestPart], promise: EventLoopPromise<Void>?) {
        var frames: [HTTP2Frame.FramePayload] = []
        frames.reserveCapacity(parts.count)
        var sliced = false
        for part in parts {
            switch part {
            case .head(let request):
                frames.append(.headers(.init(headers: HTTP2Fields.block(request))))
            case .body(var buffer):
                if buffer.readableBytes > Self.progressSlice { sliced = true }
                while buffer.readableBytes > Self.progressSlice,
                    let slice = buffer.readSlice(length: Self.progressSlice)
                {
                    frames.append(.data(.init(data: .byteBuffer(slice))))
                }
                frames.append(.data(.init(data: .byteBuffer(buffer))))
            case .end(let trailers?):
                frames.append(.headers(.init(headers: HTTP2Fields.block(trailers), endStream: true)))
            case .end(nil):
                if let last = frames.last, let ending = EndStreamCoalescer.ending(last) {
                    frames[frames.count - 1] = ending
                } else {
                    frames.append(.data(.init(data: .byteBuffer(ByteBuffer()), endStream: true)))
                }
            }
        }
        guard let last = frames.popLast() else {
            promise?.succeed(())
            return
        }
        let streams = self.streams.value
        let stream = self.stream.value
        let batches = self.batches
        func progress(completing next: EventLoopPromise<Void>?) -> EventLoopPromise<Void> {
            let progress = self.eventLoop.makePromise(of: Void.self)
            progress.futureResult.whenComplete { result in
                if case .success = result { batches.value.requestProgressed() }
                next?.completeWith(result)
            }
            return progress
        }
        for frame in frames {
            var isData = false
            if case .data = frame { isData = true }
            streams.write(frame, on: stream, flush: false, promise: sliced && isData ? progress(completing: nil) : nil)
        }
        var lastIsData = false
        if case .data = last { lastIsData = true }
        streams.write(
            last,
            on: stream,
            flush: true,
            promise: sliced && lastIsData ? progress(completing: promise) : promise
        )
    }

    /// Request body bytes per DATA write whose completion restarts the response's silence bound.
    static let progressSlice = 256 << 10
}

/// An exchange's stream as a stream channel (with NIO's decompressor in its pipeline).
struct StreamChannelIO: HTTP2ClientStreamIO {
    let channel: any Channel
    let batches: NIOLoopBound<ResponseBatches>
    let arrival: ResponseArrival
    var eventLoop: any EventLoop { self.channel.eventLoop }

    /// A large body goes in slices, as on a frame-level stream (``FrameStreamIO``), each of which,
    /// once written, tells the stream's batches that the request moved on.
    func send(_ parts: [HTTPRequestPart]) {
        let batches = self.batches
        for part in parts {
            guard case .body(var buffer) = part, buffer.readableBytes > FrameStreamIO.progressSlice else {
                self.channel.write(part, promise: nil)
                continue
            }
            while buffer.readableBytes > 0,
                let slice = buffer.readSlice(length: min(buffer.readableBytes, FrameStreamIO.progressSlice))
            {
                let progress = self.channel.eventLoop.makePromise(of: Void.self)
                progress.futureResult.whenSuccess { batches.value.requestProgressed() }
                self.channel.write(HTTPRequestPart.body(slice), promise: progress)
            }
        }
        self.channel.flush()
    }

    func sendWaiting(_ part: HTTPRequestPart) async throws {
        let channel = self.channel
        try await self.waitBounded { channel.writeAndFlush(part, promise: $0) }
    }

    func close() {
        self.channel.close(promise: nil)
    }
}
