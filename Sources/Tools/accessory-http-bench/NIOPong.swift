import ArgumentParser
import Glibc
import NIOCore
import NIOHTTP1
import NIOPosix

/// `nio-pong RESPONSE_FILE`: the floor of an HTTP/1.1 responder built on NIO. It serves
/// stdin/stdout with NIO's HTTP server pipeline and answers every request with the head and body
/// of RESPONSE_FILE (a captured `/status` response) from a plain channel handler on the event
/// loop: no async code, no swift-http-types conversion, no routing, no body handling. Measured
/// like the responder (the same blocking client loop), it shows how much of the responder's
/// time per request NIO's pipeline and HTTP codec take by themselves.
struct NIOPong: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "nio-pong", shouldDisplay: false)
    @Argument var responseFile: String

    func run() async throws {
        let text = Sys.readFile(self.responseFile)
        guard let split = text.range(of: "\r\n\r\n") else { throw BenchError("no head in \(self.responseFile)") }
        let lines = text[..<split.lowerBound].split(separator: "\r\n")
        let headers = Benchmarks.headers(lines.dropFirst())
        let head = HTTPResponseHead(version: .http1_1, status: .ok, headers: headers)
        let body = ByteBuffer(string: String(text[split.upperBound...]))
        let channel = try await NIOPipeBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // As lean as NIO's server pipeline gets (the responder's configuration).
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                        withPipeliningAssistance: false,
                        withServerUpgrade: nil,
                        withErrorHandling: false,
                        withOutboundHeaderValidation: false
                    )
                    try channel.pipeline.syncOperations.addHandler(PongHandler(head: head, body: body))
                }
            }
            .takingOwnershipOfDescriptors(input: dup(0), output: dup(1))
            .get()
        try await channel.closeFuture.get()
    }
}

private final class PongHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let head: HTTPResponseHead
    let body: ByteBuffer

    init(head: HTTPResponseHead, body: ByteBuffer) {
        self.head = head
        self.body = body
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = self.unwrapInboundIn(data) else { return }
        context.write(self.wrapOutboundOut(.head(self.head)), promise: nil)
        context.write(self.wrapOutboundOut(.body(.byteBuffer(self.body))), promise: nil)
        context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .inputClosed = event as? ChannelEvent { context.close(promise: nil) }
    }
}

/// The floor of an HTTP/1.1 client built on NIO: NIO's client pipeline and a handler that sends
/// the captured `GET /status` again as soon as the previous response ended, all on the event
/// loop: no async code, no swift-http-types, no link state machine.
extension Benchmarks {
    /// Runs `statusCount` requests per repetition against the child `command`; returns req/s and
    /// p50 latency (µs) per repetition, the first repetition dropped as a warm-up.
    func nioPing(_ exchange: StatusExchange, _ command: [String]) async throws -> ([Double], [Double]) {
        let head = try Self.requestHead(exchange.request)
        let (mine, theirs) = try Sys.socketPair()
        // Spawned before NIO takes the socket (see `ChildOnSocketPair`).
        let pid = try Sys.spawn(command, stdin: theirs, stdout: theirs, stderr: try self.childStderr())
        close(theirs)
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let channel = try await NIOPipeBootstrap(group: eventLoop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // The encoder and decoder alone (no header validation), as the link uses them.
                    try channel.pipeline.syncOperations.addHandlers([
                        HTTPRequestEncoder(),
                        ByteToMessageHandler(HTTPResponseDecoder(leftOverBytesStrategy: .dropBytes)),
                        PingHandler(head: head),
                    ])
                }
            }
            .takingOwnershipOfDescriptor(inputOutput: mine)
            .get()
        var rates: [Double] = [], p50: [Double] = []
        for rep in 0..<(self.reps + 1) {
            let count = self.statusCount
            let start = Sys.now()
            let latencies = try await eventLoop.flatSubmit {
                let promise = eventLoop.makePromise(of: [Double].self)
                do {
                    let handler = try channel.pipeline.syncOperations.handler(type: PingHandler.self)
                    handler.run(count: count, promise: promise)
                } catch {
                    promise.fail(error)
                }
                return promise.futureResult
            }.get()
            if rep == 0 { continue }
            rates.append(Double(count) / (Sys.now() - start).seconds)
            p50.append(Summary.percentile(latencies, 0.5))
        }
        try await channel.close()
        Sys.wait(pid)
        return (rates, p50)
    }

    /// The header lines of a captured head (the bench's own recording, so lines without a colon
    /// are simply skipped).
    static func headers(_ lines: ArraySlice<Substring>) -> HTTPHeaders {
        var headers = HTTPHeaders()
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.add(
                name: String(line[..<colon]),
                value: String(line[line.index(after: colon)...].drop(while: { $0 == " " }))
            )
        }
        return headers
    }

    static func requestHead(_ bytes: [UInt8]) throws -> HTTPRequestHead {
        let text = String(decoding: bytes, as: UTF8.self)
        let lines = text.split(separator: "\r\n")
        guard let requestLine = lines.first?.split(separator: " "), requestLine.count == 3 else {
            throw BenchError("cannot read the captured request line")
        }
        let headers = Self.headers(lines.dropFirst())
        return HTTPRequestHead(version: .http1_1, method: .GET, uri: String(requestLine[1]), headers: headers)
    }
}

private final class PingHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    let head: HTTPRequestHead
    private var context: ChannelHandlerContext?
    private var remaining = 0
    private var promise: EventLoopPromise<[Double]>?
    private var latencies: [Double] = []
    private var sentAt = NIODeadline.now()

    init(head: HTTPRequestHead) {
        self.head = head
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func run(count: Int, promise: EventLoopPromise<[Double]>) {
        self.remaining = count
        self.promise = promise
        self.latencies = []
        self.latencies.reserveCapacity(count)
        self.send()
    }

    private func send() {
        guard let context = self.context else { return }
        self.sentAt = .now()
        context.write(self.wrapOutboundOut(.head(self.head)), promise: nil)
        context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = self.unwrapInboundIn(data) else { return }
        self.latencies.append(Double((NIODeadline.now() - self.sentAt).nanoseconds) / 1000)
        self.remaining -= 1
        if self.remaining > 0 {
            self.send()
        } else {
            self.promise?.succeed(self.latencies)
            self.promise = nil
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.promise?.fail(BenchError("the peer closed the link"))
        self.promise = nil
    }
}
