import AccessoryClient
import AccessorySession
import AccessoryTransport
import Glibc
import NIOCore
import NIOPosix

extension Names {
    static let plainBulkPaired = "bulk GET: native, plain (paired with session=on)"
    static let sessionBulk = "bulk GET: native, session=on"
    static let plainStatusPaired = "GET /status: native, plain (paired with session=on)"
    static let sessionStatus = "GET /status: native, session=on"
    static let plainCancelToNext = "cancel → next answer: plain, shared line"
    static let sessionCancelToNext = "cancel → next answer: session=on, shared line"
}

/// One `serve --device stdio` on a socketpair that outlives every open: each `open` is a `dup`
/// of the host end, as a serial line is reopened, so an abandoned answer keeps coming.
struct SharedLineToServe: ByteStreamTransport {
    let hostEnd: CInt
    var description: String { "a shared socketpair to serve --device stdio" }
    var reopenMayCarryStaleBytes: Bool { true }
    var opensIndependentStreams: Bool { false }

    func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        let copy = dup(self.hostEnd)
        guard copy >= 0 else { throw BenchError("dup failed") }
        let channel = try await NIOPipeBootstrap(group: eventLoop)
            .channelInitializer(configure)
            .takingOwnershipOfDescriptor(inputOutput: copy)
            .get()
        return OpenedByteStream(channel: channel)
    }
}

extension Benchmarks {
    /// The session layer against plain HTTP/1.1 on the same kind of socketpair, runs alternated
    /// so that the machine's drift hits both alike; and what an abandoned download costs the
    /// next request on a line that is not reopened clean.
    func session(_ exchange: StatusExchange, into table: inout Table) async throws {
        let children = ChildList()
        let stream = { ChildOnSocketPair(command: self.serveCommand, children: children, log: try? self.childStderr()) }
        let plain = AccessoryClient(transport: stream())
        let session = AccessoryClient(transport: SessionTransport(wrapping: stream()))
        let status = try AccessoryRequest(url: "/status")
        for client in [plain, session] { _ = try await client.data(status) }

        var plainBulk: [Double] = [], sessionBulk: [Double] = []
        var plainStatus: [Double] = [], sessionStatus: [Double] = []
        let statusCount = max(100, self.statusCount / 2)
        for _ in 0..<self.reps {
            for (client, rates) in [(plain, 0), (session, 1)] {
                let start = Sys.now()
                let got = try await Self.download(client, "/bytes/\(self.bulkBytes)")
                guard got == self.bulkBytes else { throw BenchError("a GET got \(got) of \(self.bulkBytes) bytes") }
                let rate = Self.mibPerSecond(got, Sys.now() - start)
                if rates == 0 { plainBulk.append(rate) } else { sessionBulk.append(rate) }
            }
            for (client, which) in [(plain, 0), (session, 1)] {
                let start = Sys.now()
                for _ in 0..<statusCount {
                    let (head, _) = try await client.data(status)
                    guard head.status == .ok else { throw BenchError("/status answered \(head.status)") }
                }
                let rate = Double(statusCount) / (Sys.now() - start).seconds
                if which == 0 { plainStatus.append(rate) } else { sessionStatus.append(rate) }
            }
        }
        await plain.shutdown()
        await session.shutdown()
        children.reapAll()
        table.add(Names.plainBulkPaired, "MiB/s", plainBulk, note: "runs alternated with the next row")
        table.add(Names.sessionBulk, "MiB/s", sessionBulk, note: "frames of 16 KiB, CRC-32C both ways")
        table.add(Names.plainStatusPaired, "req/s", plainStatus, note: "caller on the pool")
        table.add(Names.sessionStatus, "req/s", sessionStatus)

        table.add(Names.plainCancelToNext, "ms", try await self.cancelToNext(session: false))
        table.add(Names.sessionCancelToNext, "ms", try await self.cancelToNext(session: true))

        let requestBytes = Double(exchange.request.count)
        table.add("GET /status request bytes: HTTP/1.1", "B", [requestBytes], note: "what the native client writes")
        table.add(
            "GET /status request bytes: HTTP/1.1, session=on",
            "B",
            [requestBytes + Double(SessionFrame.overhead)],
            note: "one DATA frame"
        )
        // 10 bits per byte on the wire (8N1).
        table.add(
            "GET /status request at 115200 baud",
            "ms",
            [requestBytes * 10 / 115.2],
            note: "session=on adds \(Table.format(Double(SessionFrame.overhead) * 10 / 115.2)) ms"
        )
    }

    /// Milliseconds from abandoning a 1 GB download (after its first MiB) to the answer of the
    /// next `/status`, on one `serve` whose line is never reopened clean.
    func cancelToNext(session: Bool) async throws -> [Double] {
        let (mine, theirs) = try Sys.socketPair()
        let pid = try Sys.spawn(self.serveCommand, stdin: theirs, stdout: theirs, stderr: try self.childStderr())
        close(theirs)
        let line = SharedLineToServe(hostEnd: mine)
        let client = AccessoryClient(transport: session ? SessionTransport(wrapping: line) : line)
        var times: [Double] = []
        for _ in 0..<self.reps {
            _ = try await client.execute(try AccessoryRequest(url: "/bytes/1000000000")) { response in
                var count = 0
                for try await buffer in response.body {
                    count += buffer.readableBytes
                    if count >= 1 << 20 { break }
                }
            }
            let start = Sys.now()
            let (head, _) = try await client.data(try AccessoryRequest(url: "/status"))
            guard head.status == .ok else { throw BenchError("/status after a cancel answered \(head.status)") }
            times.append((Sys.now() - start).seconds * 1000)
        }
        await client.shutdown()
        close(mine)
        Sys.wait(pid)
        return times
    }
}
