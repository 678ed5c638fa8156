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
    /// Writes `parts` and flushes them, without waiting.
    func send(_ parts: [HTTPRequestPart])
    /// Writes one part and waits until the stream took it.
    func sendWaiting(_ part: HTTPRequestPart) async throws
    /// The exchange is over: a stream that has not ended both ways is reset.
    func close()
}

/// An exchange's stream on a frame-level connection.
struct FrameStreamIO: HTTP2ClientStreamIO {
    let eventLoop: any EventLoop
    let batches: NIOLoopBound<ResponseBatches>
    private let stream: NIOLoopBound<ClientStream>
    private let streams: NIOLoopBound<HTTP2ClientStreams>

    /// Opens a stream and writes `first` on it in the same event-loop turn (stream IDs must go
    /// out in the order they were taken). On `streams`' event loop.
    static func open(
        on streams: NIOLoopBound<HTTP2ClientStreams>,
        idleTimeout: Duration,
        deadline: StreamDeadline?,
        first: [HTTPRequestPart]
    ) throws -> FrameStreamIO {
        let stream = try streams.value.openStream(idleTimeout: idleTimeout, deadline: deadline)
        let eventLoop = streams.eventLoop
        let io = FrameStreamIO(
            eventLoop: eventLoop,
            batches: NIOLoopBound(stream.batches, eventLoop: eventLoop),
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
        let promise = self.eventLoop.makePromise(of: Void.self)
        if self.eventLoop.inEventLoop {
            self.write([part], promise: promise)
        } else {
            self.eventLoop.execute { self.write([part], promise: promise) }
        }
        try await promise.futureResult.get()
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
    /// written, tells the stream's batches that the request moved on.
    private func write(_ parts: [HTTPRequestPart], promise: EventLoopPromise<Void>?) {
        var frames: [HTTP2Frame.FramePayload] = []
        frames.reserveCapacity(parts.count)
        for part in parts {
            switch part {
            case .head(let request):
                frames.append(.headers(.init(headers: HTTP2Fields.block(request))))
            case .body(var buffer):
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
        for frame in frames {
            var progress: EventLoopPromise<Void>?
            if case .data(let data) = frame, data.data.readableBytes >= Self.progressSlice {
                progress = self.eventLoop.makePromise()
                progress?.futureResult.whenSuccess { batches.value.requestProgressed() }
            }
            streams.write(frame, on: stream, flush: false, promise: progress)
        }
        streams.write(last, on: stream, flush: true, promise: promise)
    }

    /// Request body bytes per DATA write whose completion restarts the response's silence bound.
    static let progressSlice = 256 << 10
}

/// An exchange's stream as a stream channel (with NIO's decompressor in its pipeline).
struct StreamChannelIO: HTTP2ClientStreamIO {
    let channel: any Channel
    let batches: NIOLoopBound<ResponseBatches>
    var eventLoop: any EventLoop { self.channel.eventLoop }

    func send(_ parts: [HTTPRequestPart]) {
        for part in parts.dropLast() { self.channel.write(part, promise: nil) }
        if let last = parts.last { self.channel.writeAndFlush(last, promise: nil) }
    }

    func sendWaiting(_ part: HTTPRequestPart) async throws {
        try await self.channel.writeAndFlush(part).get()
    }

    func close() {
        self.channel.close(promise: nil)
    }
}
