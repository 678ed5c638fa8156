import AccessoryHTTP2
import AccessoryTransport
import ArgumentParser
import Glibc
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import Synchronization

/// `nio-h2-pong RESPONSE_FILE`: the floor of an HTTP/2 responder built on NIO. It serves
/// stdin/stdout with swift-nio-http2 (prior knowledge) and answers every stream with the status,
/// fields and body of RESPONSE_FILE (a captured HTTP/1.1 `/status` response) from a frame-payload
/// handler on the event loop: no async code, no swift-http-types conversion, no routing.
struct NIOH2Pong: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "nio-h2-pong", shouldDisplay: false)
    @Argument var responseFile: String

    func run() async throws {
        let (headers, body) = try Benchmarks.h2Response(Sys.readFile(self.responseFile))
        // No half-closure: the client's end of input closes the channel, and the process ends.
        let channel = try await NIOPipeBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    _ = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                        mode: .server,
                        // The windows our link and responder use: the default 64 KiB makes a
                        // bulk body wait for a WINDOW_UPDATE every four frames.
                        connectionConfiguration: HTTP2Windows.configuration().connection,
                        streamConfiguration: HTTP2Windows.configuration().stream
                    ) { stream in
                        stream.eventLoop.makeCompletedFuture {
                            try stream.pipeline.syncOperations.addHandler(H2PongHandler(headers: headers, body: body))
                        }
                    }
                }
            }
            .takingOwnershipOfDescriptors(input: dup(0), output: dup(1))
            .get()
        try await channel.closeFuture.get()
    }
}

/// Answers a stream once its request ended.
private final class H2PongHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    let headers: HPACKHeaders
    let body: ByteBuffer

    init(headers: HPACKHeaders, body: ByteBuffer) {
        self.headers = headers
        self.body = body
    }

    /// The body size a `GET /bytes/N` asked for.
    private var bulkBytes: Int?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let ended: Bool
        switch self.unwrapInboundIn(data) {
        case .headers(let headers):
            ended = headers.endStream
            if let path = headers.headers.first(name: ":path"), path.hasPrefix("/bytes/") {
                self.bulkBytes = Int(path.dropFirst("/bytes/".count))
            }
        case .data(let data): ended = data.endStream
        default: ended = false
        }
        guard ended else { return }
        if let bulkBytes = self.bulkBytes {
            self.sendBulk(bulkBytes, context: context)
            return
        }
        context.write(self.wrapOutboundOut(.headers(.init(headers: self.headers))), promise: nil)
        context.writeAndFlush(
            self.wrapOutboundOut(.data(.init(data: .byteBuffer(self.body), endStream: true))),
            promise: nil
        )
    }
}

extension H2PongHandler {
    /// `count` zero bytes as 64 KiB DATA frames (slices of one buffer; the stream channel holds
    /// what flow control does not let out yet), as our responder writes a bulk body.
    private func sendBulk(_ count: Int, context: ChannelHandlerContext) {
        let headers = HPACKHeaders([(":status", "200"), ("content-length", String(count))])
        context.write(self.wrapOutboundOut(.headers(.init(headers: headers, endStream: count == 0))), promise: nil)
        let chunk = ByteBuffer(repeating: 0, count: 64 << 10)
        var left = count
        while left > 0 {
            let size = min(left, chunk.readableBytes)
            left -= size
            let data = HTTP2Frame.FramePayload.Data(
                data: .byteBuffer(chunk.getSlice(at: 0, length: size) ?? chunk),
                endStream: left == 0
            )
            context.write(self.wrapOutboundOut(.data(data)), promise: nil)
        }
        context.flush()
    }
}

extension Benchmarks {
    /// The status, fields and body of a captured HTTP/1.1 response, as HTTP/2 sends them.
    static func h2Response(_ text: String) throws -> (HPACKHeaders, ByteBuffer) {
        guard let split = text.range(of: "\r\n\r\n") else { throw BenchError("no head in the captured response") }
        let lines = text[..<split.lowerBound].split(separator: "\r\n")
        var headers = HPACKHeaders([(":status", "200")])
        for (name, value) in Self.headers(lines.dropFirst()) where name.lowercased() != "connection" {
            headers.add(name: name.lowercased(), value: value)
        }
        return (headers, ByteBuffer(string: String(text[split.upperBound...])))
    }

    /// The floor of an HTTP/2 client and responder pair built on NIO: a bare client that opens a
    /// stream per `GET /status` from the event loop (no async code) against `nio-h2-pong`.
    /// Returns req/s per repetition, the first dropped as a warm-up.
    func nioH2Ping(_ command: [String]) async throws -> [Double] {
        try await self.nioH2Ping(command, path: "/status", count: self.statusCount)
    }

    /// MiB/s of a bare NIO HTTP/2 client's `GET /bytes/<bulkBytes>` against `command`, the body
    /// dropped as it arrives: the ceiling of an HTTP/2 bulk transfer on NIO.
    func nioH2Bulk(_ command: [String]) async throws -> [Double] {
        let perSecond = try await self.nioH2Ping(command, path: "/bytes/\(self.bulkBytes)", count: 1)
        return perSecond.map { $0 * Double(self.bulkBytes) / 1_048_576 }
    }

    /// Requests per second of `count` GETs of `path`, one stream after another.
    func nioH2Ping(_ command: [String], path: String, count: Int) async throws -> [Double] {
        let (mine, theirs) = try Sys.socketPair()
        let pid = try Sys.spawn(command, stdin: theirs, stdout: theirs, stderr: try self.childStderr())
        close(theirs)
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let multiplexerBox = TrackedMutex<NIOHTTP2Handler.StreamMultiplexer?>(nil)
        let channel = try await NIOPipeBootstrap(group: eventLoop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let multiplexer = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                        mode: .client,
                        // The windows our link and responder use: the default 64 KiB makes a
                        // bulk body wait for a WINDOW_UPDATE every four frames.
                        connectionConfiguration: HTTP2Windows.configuration().connection,
                        streamConfiguration: HTTP2Windows.configuration().stream
                    ) { stream in
                        stream.close(promise: nil)  // no pushes
                        return stream.eventLoop.makeSucceededVoidFuture()
                    }
                    multiplexerBox.withLock { $0 = multiplexer }
                }
            }
            .takingOwnershipOfDescriptor(inputOutput: mine)
            .get()
        guard let multiplexer = multiplexerBox.withLock({ $0 }) else {
            throw BenchError("no HTTP/2 multiplexer")
        }
        let request = HPACKHeaders([
            (":method", "GET"), (":scheme", "http"), (":authority", "accessory"), (":path", path),
        ])
        var rates: [Double] = []
        for rep in 0..<(self.reps + 1) {
            let start = Sys.now()
            try await eventLoop.flatSubmit {
                let done = eventLoop.makePromise(of: Void.self)
                H2PingLoop(multiplexer: multiplexer, request: request, remaining: count, done: done).next()
                return done.futureResult
            }.get()
            if rep == 0 { continue }
            rates.append(Double(count) / (Sys.now() - start).seconds)
        }
        try await channel.close()
        Sys.wait(pid)
        return rates
    }
}

/// One request after another, each on a new stream, each sent when the previous one ended.
private final class H2PingLoop {
    let multiplexer: NIOHTTP2Handler.StreamMultiplexer
    let request: HPACKHeaders
    var remaining: Int
    let done: EventLoopPromise<Void>

    init(
        multiplexer: NIOHTTP2Handler.StreamMultiplexer,
        request: HPACKHeaders,
        remaining: Int,
        done: EventLoopPromise<Void>
    ) {
        self.multiplexer = multiplexer
        self.request = request
        self.remaining = remaining
        self.done = done
    }

    func next() {
        guard self.remaining > 0 else {
            self.done.succeed(())
            return
        }
        self.remaining -= 1
        let loopBound = NIOLoopBound(self, eventLoop: self.done.futureResult.eventLoop)
        self.multiplexer.createStreamChannel(promise: nil) { stream in
            stream.eventLoop.makeCompletedFuture {
                let handler = H2PingHandler(request: loopBound.value.request) { loopBound.value.next() }
                try stream.pipeline.syncOperations.addHandler(handler)
            }
        }
    }
}

private final class H2PingHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    let request: HPACKHeaders
    let ended: () -> Void

    init(request: HPACKHeaders, ended: @escaping () -> Void) {
        self.request = request
        self.ended = ended
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { self.send(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        self.send(context: context)
        context.fireChannelActive()
    }

    private var sent = false

    private func send(context: ChannelHandlerContext) {
        guard !self.sent else { return }
        self.sent = true
        context.writeAndFlush(
            self.wrapOutboundOut(.headers(.init(headers: self.request, endStream: true))),
            promise: nil
        )
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .headers(let headers) where headers.endStream: self.ended()
        case .data(let data) where data.endStream: self.ended()
        default: break
        }
    }
}
