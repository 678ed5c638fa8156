import AccessoryClient
import AccessoryTransport
import Glibc
import NIOCore
import Synchronization

extension Names {
    static let plainBulkForHTTP2 = "bulk GET: native HTTP/1.1 (paired with HTTP/2)"
    static let http2Bulk = "bulk GET: native HTTP/2"
    static let http1StatusForHTTP2 = "GET /status: native HTTP/1.1, 1 caller (paired)"
    static let http2Status = "GET /status: native HTTP/2, 1 caller"
    static let http2Status8 = "GET /status: native HTTP/2, 8 callers"
    static let nioH2PairBulk = "bulk GET: bare NIO HTTP/2 client → bare NIO HTTP/2 server"
    static let nioH2ClientBulkFromResponder = "bulk GET: bare NIO HTTP/2 client → serve --device stdio"
    static let nioH2PairFloor = "GET /status: bare NIO HTTP/2 client → bare NIO HTTP/2 server"
    static let nioH2ClientToResponder = "GET /status: bare NIO HTTP/2 client → serve --device stdio"
    static let http2StatusToBareServer = "GET /status: native HTTP/2, 1 caller → bare NIO HTTP/2 server"
    static let http2IdleP99 = "GET /status: HTTP/2 p99, link idle"
    static let http2BusyP99 = "GET /status: HTTP/2 p99, bulk GET running"
    static let nioH2PairIdleP99 = "GET /status: bare NIO HTTP/2 pair p99, connection idle"
    static let nioH2PairBusyP99 = "GET /status: bare NIO HTTP/2 pair p99, bulk GET running"
    static let http2ToBareIdleP99 = "GET /status: HTTP/2 p99 → bare NIO HTTP/2 server, idle"
    static let http2ToBareBusyP99 = "GET /status: HTTP/2 p99 → bare NIO HTTP/2 server, bulk GET running"
    static let nioH2ToResponderIdleP99 = "GET /status: bare NIO HTTP/2 client p99 → serve --device stdio, idle"
    static let nioH2ToResponderBusyP99 =
        "GET /status: bare NIO HTTP/2 client p99 → serve --device stdio, bulk GET running"
    static let http2CancelToNext = "cancel → next answer: HTTP/2"
    static let http1RequestBytes = "GET /status bytes written: HTTP/1.1"
    static let http2RequestBytes = "GET /status bytes written: HTTP/2 (HPACK)"
}

/// Counts the bytes a link writes to its transport.
struct CountingTransport: ByteStreamTransport {
    let inner: any ByteStreamTransport
    let written: ByteCounter
    var description: String { self.inner.description }

    func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        let counter = self.written
        return try await self.inner.open(on: eventLoop) { channel in
            do {
                try channel.pipeline.syncOperations.addHandler(CountingHandler(counter: counter))
            } catch {
                return channel.eventLoop.makeFailedFuture(error)
            }
            return configure(channel)
        }
    }
}

final class ByteCounter: Sendable {
    private let count = TrackedMutex(0)
    func add(_ bytes: Int) { self.count.withLock { $0 += bytes } }
    var value: Int { self.count.withLock { $0 } }
}

final class CountingHandler: ChannelOutboundHandler, Sendable {
    typealias OutboundIn = ByteBuffer
    let counter: ByteCounter
    init(counter: ByteCounter) { self.counter = counter }
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        self.counter.add(self.unwrapOutboundIn(data).readableBytes)
        context.write(data, promise: promise)
    }
}

extension Benchmarks {
    /// HTTP/2 on the link against HTTP/1.1 on the same kind of socketpair (runs alternated), its
    /// concurrency, its latency under a bulk transfer, what a cancel costs, and HPACK's saving.
    func http2(_ exchange: StatusExchange, into table: inout Table) async throws {
        let children = ChildList()
        let stream = { ChildOnSocketPair(command: self.serveCommand, children: children, log: try? self.childStderr()) }
        let h1Bytes = ByteCounter()
        let h2Bytes = ByteCounter()
        let h1 = AccessoryClient(transport: CountingTransport(inner: stream(), written: h1Bytes))
        var configuration = AccessoryClient.Configuration()
        configuration.link.httpVersion = .http2
        let h2 = AccessoryClient(
            transport: CountingTransport(inner: stream(), written: h2Bytes),
            configuration: configuration
        )
        let status = try AccessoryRequest(url: "/status")
        for client in [h1, h2] { _ = try await client.data(status) }

        // Bytes written per /status once warm (HPACK's dynamic table filled).
        let perRequest = { (client: AccessoryClient, counter: ByteCounter) async throws -> Double in
            let before = counter.value
            for _ in 0..<100 { _ = try await client.data(status) }
            return Double(counter.value - before) / 100
        }
        table.add(Names.http1RequestBytes, "B", [try await perRequest(h1, h1Bytes)], note: "per request, warm")
        table.add(Names.http2RequestBytes, "B", [try await perRequest(h2, h2Bytes)], note: "per request, warm")

        // HTTP/1.1 and HTTP/2 bulk, callers on the pool, then on the link's executor.
        var bulk: [[Double]] = [[], [], [], []]
        var h1Status: [Double] = [], h2Status: [Double] = [], h2Status8: [Double] = []
        var h2StatusOnLink: [Double] = []
        let count = max(200, self.statusCount / 2)
        for _ in 0..<self.reps {
            for caller in CallerExecutor.allCases {
                for (client, isH2) in [(h1, false), (h2, true)] {
                    let start = Sys.now()
                    let got = try await caller.run(client) {
                        try await Self.download(client, "/bytes/\(self.bulkBytes)")
                    }
                    guard got == self.bulkBytes else {
                        throw BenchError("a GET got \(got) of \(self.bulkBytes) bytes")
                    }
                    let rate = Self.mibPerSecond(got, Sys.now() - start)
                    bulk[caller == .pool ? (isH2 ? 1 : 0) : (isH2 ? 3 : 2)].append(rate)
                }
            }
            for (client, isH2) in [(h1, false), (h2, true)] {
                let start = Sys.now()
                for _ in 0..<count { _ = try await client.data(status) }
                let rate = Double(count) / (Sys.now() - start).seconds
                if isH2 { h2Status.append(rate) } else { h1Status.append(rate) }
            }
            // The documented way to make many small requests (as the HTTP/1.1 row that is
            // compared with its bare NIO pair runs): no thread hop per request.
            let onLinkStart = Sys.now()
            try await CallerExecutor.link.run(h2) { for _ in 0..<count { _ = try await h2.data(status) } }
            h2StatusOnLink.append(Double(count) / (Sys.now() - onLinkStart).seconds)
            let start = Sys.now()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<8 {
                    group.addTask { for _ in 0..<(count / 8) { _ = try await h2.data(status) } }
                }
                try await group.waitForAll()
            }
            h2Status8.append(Double(count / 8 * 8) / (Sys.now() - start).seconds)
        }
        table.add(Names.plainBulkForHTTP2, "MiB/s", bulk[0], note: "runs alternated with the next row")
        table.add(Names.http2Bulk, "MiB/s", bulk[1])
        table.add(
            Names.plainBulkForHTTP2 + CallerOnLink.suffix,
            "MiB/s",
            bulk[2],
            note: "runs alternated with the next row"
        )
        table.add(Names.http2Bulk + CallerOnLink.suffix, "MiB/s", bulk[3])
        table.add(Names.http1StatusForHTTP2, "req/s", h1Status)
        table.add(Names.http2Status, "req/s", h2Status)
        table.add(Names.http2Status + CallerOnLink.suffix, "req/s", h2StatusOnLink)
        table.add(Names.http2Status8, "req/s", h2Status8, note: "8 tasks on one connection")
        let responsePath = "\(self.workDir)/status-response"
        try exchange.response.withUnsafeBytes { try Sys.writeFile(responsePath, $0) }
        table.add(
            Names.nioH2PairFloor,
            "req/s",
            try await self.nioH2Ping([self.selfPath, "nio-h2-pong", responsePath]),
            note: "a bare NIO HTTP/2 client → a bare NIO HTTP/2 server (`nio-h2-pong`), a stream per request"
        )
        // The two halves apart: which side of the native pair costs what.
        table.add(Names.nioH2ClientToResponder, "req/s", try await self.nioH2Ping(self.serveCommand))
        // The ceiling of HTTP/2 bulk on NIO: a bare client and server, no async code, the body
        // in 64 KiB DATA writes as our responder makes them; then the bare client against ours.
        table.add(
            Names.nioH2PairBulk,
            "MiB/s",
            try await self.nioH2Bulk([self.selfPath, "nio-h2-pong", responsePath]),
            note: "the body dropped as it arrives"
        )
        table.add(Names.nioH2ClientBulkFromResponder, "MiB/s", try await self.nioH2Bulk(self.serveCommand))
        let toBareServer = AccessoryClient(
            transport: ChildOnSocketPair(
                command: [self.selfPath, "nio-h2-pong", responsePath],
                children: children,
                log: try? self.childStderr()
            ),
            configuration: configuration
        )
        var nativeToBare: [Double] = []
        for rep in 0..<(self.reps + 1) {
            let start = Sys.now()
            for _ in 0..<count { _ = try await toBareServer.data(status) }
            if rep > 0 { nativeToBare.append(Double(count) / (Sys.now() - start).seconds) }
        }
        table.add(Names.http2StatusToBareServer, "req/s", nativeToBare)

        // p99 of /status with the link idle, then while a bulk download runs on it; then the
        // bare pair and each half of ours against the bare other half, to say which side a
        // gap to the bare pair's ratio is on.
        let ours = try await self.linkP99(h2)
        table.add(Names.http2IdleP99, "µs", ours.idle)
        table.add(Names.http2BusyP99, "µs", ours.busy, note: "an 8 GiB GET on the same connection")
        let oursOnLink = try await self.linkP99(h2, caller: .link)
        table.add(Names.http2IdleP99 + CallerOnLink.suffix, "µs", oursOnLink.idle)
        table.add(Names.http2BusyP99 + CallerOnLink.suffix, "µs", oursOnLink.busy)
        let bare = try await self.nioH2P99([self.selfPath, "nio-h2-pong", responsePath])
        table.add(Names.nioH2PairIdleP99, "µs", bare.idle)
        table.add(Names.nioH2PairBusyP99, "µs", bare.busy, note: "the same measurement, no async code")
        let clientHalf = try await self.linkP99(toBareServer)
        await toBareServer.shutdown()
        table.add(Names.http2ToBareIdleP99, "µs", clientHalf.idle)
        table.add(Names.http2ToBareBusyP99, "µs", clientHalf.busy)
        let responderHalf = try await self.nioH2P99(self.serveCommand)
        table.add(Names.nioH2ToResponderIdleP99, "µs", responderHalf.idle)
        table.add(Names.nioH2ToResponderBusyP99, "µs", responderHalf.busy)

        var cancels: [Double] = []
        for _ in 0..<self.reps {
            _ = try await h2.execute(try AccessoryRequest(url: "/bytes/1000000000")) { response in
                var seen = 0
                for try await buffer in response.body {
                    seen += buffer.readableBytes
                    if seen >= 1 << 20 { break }
                }
            }
            let start = Sys.now()
            _ = try await h2.data(status)
            cancels.append((Sys.now() - start).seconds * 1000)
        }
        table.add(Names.http2CancelToNext, "ms", cancels, note: "the stream is reset, the connection kept")
        await h1.shutdown()
        await h2.shutdown()
        children.reapAll()
    }

    /// The p99 of `client`'s `GET /status` (500 in a row), with its connection idle, then while
    /// an 8 GiB GET runs on it; one of each per repetition.
    func linkP99(
        _ client: AccessoryClient,
        caller: CallerExecutor = .pool
    ) async throws -> (idle: [Double], busy: [Double]) {
        let status = try AccessoryRequest(url: "/status")
        let p99 = { () async throws -> Double in
            var latencies: [Double] = []
            for _ in 0..<500 {
                let begin = Sys.now()
                _ = try await client.data(status)
                latencies.append((Sys.now() - begin).seconds * 1e6)
            }
            return Summary.percentile(latencies, 0.99)
        }
        var idle: [Double] = [], busy: [Double] = []
        for _ in 0..<self.reps {
            idle.append(try await caller.run(client) { try await p99() })
            let executor: any TaskExecutor = caller == .pool ? globalConcurrentExecutor : client.taskExecutor
            let bulk = Task(executorPreference: executor) { try await Self.download(client, "/bytes/\(8 << 30)") }
            try await Task.sleep(for: .milliseconds(20))
            busy.append(try await caller.run(client) { try await p99() })
            bulk.cancel()
            _ = await bulk.result
        }
        return (idle, busy)
    }
}
