import AccessoryClient
import AccessoryEmulator
import AccessoryHTTP1
import AccessoryTransport
import ArgumentParser
import Glibc
import NIOCore
import NIOPosix
import Synchronization

/// The rows that bound the others: the raw socketpair and the bare NIO peers.
extension Benchmarks {
    // MARK: The exchange the small-request measurements repeat

    struct StatusExchange: Sendable {
        let request: [UInt8]
        let response: [UInt8]
        var responseBody: [UInt8] {
            guard let end = response.firstRange(of: Array("\r\n\r\n".utf8)) else { return [] }
            return Array(response[end.upperBound...])
        }
    }

    /// The exact bytes the native client sends for `GET /status` and the exact bytes the
    /// responder answers with, so the raw ping-pong moves the same bytes.
    func captureStatusExchange() async throws -> StatusExchange {
        // 1. What the client writes: a peer in this process reads it and answers 204.
        let peerEnd = TrackedMutex<CInt?>(nil)
        let client = AccessoryClient(
            transport: SocketPairTransport(name: "capture") { fd in peerEnd.withLock { $0 = fd } }
        )
        let request = try AccessoryRequest(url: "/status")
        let pending = Task { try await client.data(request) }
        var fd: CInt? = nil
        for _ in 0..<5000 where fd == nil {
            fd = peerEnd.withLock { $0 }
            if fd == nil { try await Task.sleep(for: .milliseconds(1)) }
        }
        guard let fd else { throw BenchError("the capture peer never got its socket") }
        let requestBytes = try Sys.readUntil(fd, Array("\r\n\r\n".utf8))
        try Sys.writeAll(fd, Array("HTTP/1.1 204 No Content\r\n\r\n".utf8))
        _ = try await pending.value
        await client.shutdown()
        close(fd)

        // 2. What the responder answers to exactly those bytes.
        let (mine, theirs) = try Sys.socketPair()
        defer { close(mine) }
        let pid = try Sys.spawn(self.serveCommand, stdin: theirs, stdout: theirs, stderr: try self.childStderr())
        close(theirs)
        try Sys.writeAll(mine, requestBytes)
        var response = try Sys.readUntil(mine, Array("\r\n\r\n".utf8))
        guard let headEnd = response.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound else {
            throw BenchError("the /status response has no end of head")
        }
        let head = String(decoding: response[..<headEnd], as: UTF8.self).lowercased()
        guard let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
            let length = Int(line.dropFirst("content-length:".count).trimmingCharacters())
        else { throw BenchError("the /status response has no Content-Length: \(head)") }
        var chunk = [UInt8](repeating: 0, count: 4096)
        while response.count < headEnd + length {
            let got = chunk.withUnsafeMutableBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return -1 }
                return read(mine, base, buffer.count)
            }
            guard got > 0 else { throw BenchError("the responder closed in the middle of /status") }
            response += chunk[0..<got]
        }
        shutdown(mine, CInt(SHUT_WR))
        Sys.wait(pid)
        return StatusExchange(request: requestBytes, response: response)
    }

    // MARK: Socketpair: the limit

    func rawBulk(into table: inout Table) throws {
        let (mine, theirs) = try Sys.socketPair()
        let pid = try Sys.spawn(
            [self.selfPath, "raw-source", String(self.bulkBytes)],
            stdin: theirs,
            stdout: theirs,
            stderr: try self.childStderr()
        )
        close(theirs)
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: RawLimits.blockSize, alignment: 4096)
        defer { scratch.deallocate() }
        var rates: [Double] = []
        for _ in 0..<(self.reps + 1) {  // the first is a warm-up
            let start = Sys.now()
            try Sys.writeAll(mine, [1])
            let got = try Sys.drain(mine, count: self.bulkBytes, scratch: scratch)
            guard got == self.bulkBytes else { throw BenchError("raw-source sent \(got) of \(self.bulkBytes) bytes") }
            rates.append(Self.mibPerSecond(got, Sys.now() - start))
        }
        close(mine)
        Sys.wait(pid)
        table.add(
            Names.rawBulk,
            "MiB/s",
            Array(rates.dropFirst()),
            note: "read(2) 256 KiB from a child's write(2) 256 KiB"
        )
    }

    func rawPingPong(_ exchange: StatusExchange, into table: inout Table) throws {
        let responsePath = "\(self.workDir)/status-response"
        try exchange.response.withUnsafeBytes { try Sys.writeFile(responsePath, $0) }
        let (rates, p50, p99) = try self.pingPong(
            exchange,
            [self.selfPath, "raw-pong", String(exchange.request.count), responsePath]
        )
        let note = "\(exchange.request.count) B request, \(exchange.response.count) B response, blocking read/write"
        table.add(Names.rawStatus, "req/s", rates, note: note)
        table.add(Names.rawStatusP50, "µs", p50)
        table.add(Names.rawStatusP99, "µs", p99)
        // The responder alone: the same request bytes, written by a blocking loop instead of
        // the native client, so the two halves of the native latency can be told apart.
        let (serveRates, serveP50, _) = try self.pingPong(exchange, self.serveCommand)
        table.add(Names.responderStatus, "req/s", serveRates, note: "the same loop against `serve --device stdio`")
        table.add(Names.responderStatusP50, "µs", serveP50)
        // The floor of any NIO-based responder: NIO's HTTP pipeline and a handler that answers
        // on the event loop with the captured bytes, nothing else.
        let (floorRates, floorP50, _) = try self.pingPong(exchange, [self.selfPath, "nio-pong", responsePath])
        table.add(
            Names.nioFloorStatus,
            "req/s",
            floorRates,
            note: "the same loop against a bare NIO HTTP/1.1 handler (`nio-pong`)"
        )
        table.add(Names.nioFloorStatusP50, "µs", floorP50)
    }

    /// The two NIO floors together: a bare NIO client against the raw pong (the client's floor)
    /// and against the bare NIO handler (the floor of any NIO client and responder pair).
    func nioFloors(_ exchange: StatusExchange, into table: inout Table) async throws {
        let responsePath = "\(self.workDir)/status-response"
        let (clientRates, clientP50) = try await self.nioPing(
            exchange,
            [self.selfPath, "raw-pong", String(exchange.request.count), responsePath]
        )
        table.add(Names.nioClientFloor, "req/s", clientRates, note: "a bare NIO HTTP/1.1 client handler → raw pong")
        table.add(Names.nioClientFloorP50, "µs", clientP50)
        let (pairRates, pairP50) = try await self.nioPing(exchange, [self.selfPath, "nio-pong", responsePath])
        table.add(Names.nioPairFloor, "req/s", pairRates, note: "a bare NIO client handler → a bare NIO server handler")
        table.add(Names.nioPairFloorP50, "µs", pairP50)
    }

    /// Sends the captured request and reads a response of the captured length, `statusCount`
    /// times per repetition, against the child `command` on a socketpair.
    func pingPong(_ exchange: StatusExchange, _ command: [String]) throws -> ([Double], [Double], [Double]) {
        let (mine, theirs) = try Sys.socketPair()
        let pid = try Sys.spawn(command, stdin: theirs, stdout: theirs, stderr: try self.childStderr())
        close(theirs)
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        defer { scratch.deallocate() }
        var rates: [Double] = [], p50: [Double] = [], p99: [Double] = []
        for rep in 0..<(self.reps + 1) {
            var latencies: [Double] = []
            latencies.reserveCapacity(self.statusCount)
            let start = Sys.now()
            for _ in 0..<self.statusCount {
                let begin = Sys.now()
                try Sys.writeAll(mine, exchange.request)
                guard try Sys.drain(mine, count: exchange.response.count, scratch: scratch) == exchange.response.count
                else {
                    throw BenchError("\(command[0]) closed early")
                }
                latencies.append((Sys.now() - begin).seconds * 1e6)
            }
            if rep == 0 { continue }
            rates.append(Double(self.statusCount) / (Sys.now() - start).seconds)
            p50.append(Summary.percentile(latencies, 0.5))
            p99.append(Summary.percentile(latencies, 0.99))
        }
        close(mine)
        Sys.wait(pid)
        return (rates, p50, p99)
    }
}
