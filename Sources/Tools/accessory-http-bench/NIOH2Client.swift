import AccessoryHTTP2
import AccessoryTransport
import Glibc
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import Synchronization

/// A bare NIO HTTP/2 client on a socketpair to a child: the floor of any client built on
/// swift-nio-http2. It runs on its event loop alone (no async code, no swift-http-types), opens
/// a stream per request with a frame-payload handler, and asks for the windows and the frame
/// size our link asks for.
struct BareH2Connection {
    let channel: any Channel
    let multiplexer: NIOHTTP2Handler.StreamMultiplexer
    let pid: pid_t

    var eventLoop: any EventLoop { self.channel.eventLoop }

    static func open(_ command: [String], stderr: CInt) async throws -> BareH2Connection {
        let (mine, theirs) = try Sys.socketPair()
        let pid = try Sys.spawn(command, stdin: theirs, stdout: theirs, stderr: stderr)
        Glibc.close(theirs)
        let multiplexerBox = TrackedMutex<NIOHTTP2Handler.StreamMultiplexer?>(nil)
        let channel = try await NIOPipeBootstrap(group: MultiThreadedEventLoopGroup.singleton.next())
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // The default 64 KiB window makes a bulk body wait for a WINDOW_UPDATE every
                    // four frames; the default 16 KiB frames are four times the frames our link
                    // decodes.
                    var settings = HTTP2Windows.configuration()
                    settings.connection.initialSettings.append(
                        HTTP2Setting(parameter: .maxFrameSize, value: HTTP2Windows.maxFrameSize(bytesPerSecond: nil))
                    )
                    let multiplexer = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                        mode: .client,
                        connectionConfiguration: settings.connection,
                        streamConfiguration: settings.stream
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
        return BareH2Connection(channel: channel, multiplexer: multiplexer, pid: pid)
    }

    static func request(_ path: String) -> HPACKHeaders {
        HPACKHeaders([(":method", "GET"), (":scheme", "http"), (":authority", "accessory"), (":path", path)])
    }

    /// `count` GETs of `path`, one stream after another; each one's time in µs.
    func ping(_ path: String, count: Int) async throws -> [Double] {
        let request = Self.request(path)
        let (multiplexer, eventLoop) = (self.multiplexer, self.eventLoop)
        return try await eventLoop.flatSubmit {
            let done = eventLoop.makePromise(of: [Double].self)
            H2PingLoop(multiplexer: multiplexer, request: request, remaining: count, done: done).next()
            return done.futureResult
        }.get()
    }

    /// Starts a GET of `path` whose body is dropped as it arrives; closing the returned stream
    /// resets it (RST_STREAM).
    func startDownload(_ path: String) async throws -> any Channel {
        let request = Self.request(path)
        let promise = self.eventLoop.makePromise(of: (any Channel).self)
        self.multiplexer.createStreamChannel(promise: promise) { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.pipeline.syncOperations.addHandler(H2PingHandler(request: request) {})
            }
        }
        return try await promise.futureResult.get()
    }

    func close() async throws {
        try await self.channel.close()
        Sys.wait(self.pid)
    }
}

extension Benchmarks {
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
        let connection = try await BareH2Connection.open(command, stderr: try self.childStderr())
        var rates: [Double] = []
        for rep in 0..<(self.reps + 1) {
            let start = Sys.now()
            _ = try await connection.ping(path, count: count)
            if rep == 0 { continue }
            rates.append(Double(count) / (Sys.now() - start).seconds)
        }
        try await connection.close()
        return rates
    }

    /// The p99 of a bare client's `GET /status` (500 in a row) against `command` with the
    /// connection idle, then while an 8 GiB GET runs on it: what the same measurement of our
    /// link is against (the floor of a design on NIO on this machine).
    func nioH2P99(_ command: [String]) async throws -> (idle: [Double], busy: [Double]) {
        let connection = try await BareH2Connection.open(command, stderr: try self.childStderr())
        _ = try await connection.ping("/status", count: 100)  // warm-up
        var idle: [Double] = [], busy: [Double] = []
        for _ in 0..<self.reps {
            idle.append(Summary.percentile(try await connection.ping("/status", count: 500), 0.99))
            let download = try await connection.startDownload("/bytes/\(8 << 30)")
            try await Task.sleep(for: .milliseconds(20))
            busy.append(Summary.percentile(try await connection.ping("/status", count: 500), 0.99))
            download.close(promise: nil)  // RST_STREAM; its promise fails by design (StreamClosed)
        }
        try await connection.close()
        return (idle, busy)
    }
}

/// One request after another, each on a new stream, each sent when the previous one ended;
/// records each one's time.
private final class H2PingLoop {
    let multiplexer: NIOHTTP2Handler.StreamMultiplexer
    let request: HPACKHeaders
    var remaining: Int
    let done: EventLoopPromise<[Double]>
    var latencies: [Double] = []
    var started = Sys.now()

    init(
        multiplexer: NIOHTTP2Handler.StreamMultiplexer,
        request: HPACKHeaders,
        remaining: Int,
        done: EventLoopPromise<[Double]>
    ) {
        self.multiplexer = multiplexer
        self.request = request
        self.remaining = remaining
        self.done = done
        self.latencies.reserveCapacity(remaining)
    }

    func next() {
        guard self.remaining > 0 else {
            self.done.succeed(self.latencies)
            return
        }
        self.remaining -= 1
        self.started = Sys.now()
        let loopBound = NIOLoopBound(self, eventLoop: self.done.futureResult.eventLoop)
        self.multiplexer.createStreamChannel(promise: nil) { stream in
            stream.eventLoop.makeCompletedFuture {
                let handler = H2PingHandler(request: loopBound.value.request) {
                    let loop = loopBound.value
                    loop.latencies.append((Sys.now() - loop.started).seconds * 1e6)
                    loop.next()
                }
                try stream.pipeline.syncOperations.addHandler(handler)
            }
        }
    }
}

/// Sends one request on its stream when it is active, and calls `ended` at the end of the
/// response; the response's data is dropped.
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
