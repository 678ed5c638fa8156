import AccessoryClient
import AccessoryEmulator
import AccessoryHTTP1
import AccessoryTransport
import ArgumentParser
import Glibc
import NIOCore
import NIOPosix
import Synchronization

@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accessory-http-bench",
        abstract:
            "Throughput, latency and memory of accessory-http, side by side with the raw limit and curl/h2load + nginx.",
        subcommands: [
            Run.self, Loop.self, RawSource.self, RawPong.self, NIOPong.self, NIOH2Pong.self, URLSessionDownload.self,
        ],
        defaultSubcommand: Run.self
    )
}

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run every measurement and print the table."
    )

    @Option(help: "The accessory-http CLI (default: next to this executable).") var cli: String?
    @Option(help: "Repetitions of each measurement (min/median/max are over these).") var reps = 5
    @Option(name: .customLong("bulk-mib"), help: "MiB per bulk GET over the socketpair.") var bulkMiB = 256
    @Option(help: "GET /status requests per repetition.") var statusCount = 5000
    @Option(name: .customLong("memory-mib"), help: "MiB per download for the memory measurement.") var memoryMiB = 1024
    @Option(name: .customLong("pty-mib"), help: "MiB per transfer over the pty.") var ptyMiB = 64
    @Option(help: "Scratch directory (nginx root, downloads, logs).") var workDir = "/tmp/accessory-http-bench"
    @Flag(help: "Skip curl/h2load + nginx.") var skipPeers = false
    @Option(help: "Abort the whole run after this many seconds.") var timeLimit: UInt32 = 1200
    @Option(
        help: "Only these groups, comma separated: bulk,status,cli,urlsession,peers,memory,pty,session,http2,bridge."
    )
    var only: String?

    func run() async throws {
        alarm(self.timeLimit)
        let cli =
            self.cli
            ?? (Sys.executablePath().split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(
                separator: "/"
            ) + "/accessory-http")
        guard access(cli, X_OK) == 0 else {
            throw BenchError("no accessory-http CLI at \(cli); build it or pass --cli")
        }
        mkdir(self.workDir, 0o755)
        let bench = Benchmarks(
            cli: cli,
            reps: max(1, self.reps),
            bulkBytes: self.bulkMiB << 20,
            statusCount: self.statusCount,
            memoryBytes: self.memoryMiB << 20,
            ptyBytes: self.ptyMiB << 20,
            workDir: self.workDir
        )
        let groups = Set(
            (self.only ?? "bulk,status,cli,urlsession,peers,memory,pty,session,http2,bridge").split(separator: ",").map(
                String.init
            )
        )
        var table = Table()
        let log = { (text: String) in StandardError.write("bench: \(text)\n") }

        log("capturing the GET /status exchange")
        let exchange = try await bench.captureStatusExchange()
        if groups.contains("bulk") || groups.contains("status") {
            log("socketpair: raw limit")
            try bench.rawBulk(into: &table)
            if groups.contains("status") {
                try bench.rawPingPong(exchange, into: &table)
                try await bench.nioFloors(exchange, into: &table)
            }
            log("socketpair: native API")
            try await bench.native(into: &table, bulk: groups.contains("bulk"), status: groups.contains("status"))
        }
        if groups.contains("cli") {
            log("socketpair: CLI")
            try bench.cliBulk(into: &table)
        }
        if groups.contains("peers") && !self.skipPeers {
            log("peers: curl and h2load against nginx")
            try await bench.peers(exchange, into: &table)
        }
        if groups.contains("memory") {
            log("memory: CLI download to a file")
            try bench.memory(into: &table)
            if groups.contains("urlsession") {
                log("memory: URLSession download to a file")
                try URLSessionBench.memory(bench, into: &table)
            }
        }
        // After the memory rows: the URLSession bulk runs in this process and raises its peak
        // RSS, which `posix_spawn` children inherit in their `ru_maxrss`.
        if groups.contains("urlsession") {
            log("socketpair: URLSession")
            try await URLSessionBench.measure(bench, into: &table)
        }
        if groups.contains("session") {
            log("socketpair: the session layer against plain HTTP/1.1")
            try await bench.session(exchange, into: &table)
        }
        if groups.contains("http2") {
            log("socketpair: HTTP/2 against HTTP/1.1")
            try await bench.http2(exchange, into: &table)
        }
        if groups.contains("bridge") {
            log("bridge: curl and h2load through accessory-http bridge")
            try await bench.bridge(into: &table)
        }
        if groups.contains("pty") {
            log("pty: raw limit and native API")
            try await bench.pty(into: &table)
        }
        alarm(0)
        print(Report.render(table, bench: bench))
    }
}

/// Writes to stderr unbuffered, so progress interleaves with children's messages sensibly.
enum StandardError {
    static func write(_ text: String) {
        var text = text
        text.withUTF8 { _ = try? Sys.writeAll(2, UnsafeRawBufferPointer($0)) }
    }
}

/// The child processes a native client started through its transport, to reap them later.
final class ChildList: Sendable {
    let pids = TrackedMutex<[pid_t]>([])
    func reapAll() {
        for pid in self.pids.withLock({ pids in
            defer { pids = [] }; return pids
        }) { Sys.wait(pid) }
    }
}

struct Benchmarks: Sendable {
    let cli: String
    let reps: Int
    let bulkBytes: Int
    let statusCount: Int
    let memoryBytes: Int
    let ptyBytes: Int
    let workDir: String

    var serveCommand: [String] { [self.cli, "serve", "--device", "stdio"] }
    var selfPath: String { Sys.executablePath() }
    var childLog: String { "\(self.workDir)/children.log" }

    func childStderr() throws -> CInt {
        let fd = open(self.childLog, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw BenchError("cannot open \(self.childLog)") }
        return fd
    }

    static func mibPerSecond(_ bytes: Int, _ duration: Duration) -> Double {
        Double(bytes) / 1_048_576 / duration.seconds
    }

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

    // MARK: Socketpair: the native API

    /// A client whose transport is a socketpair with `accessory-http serve --device stdio`
    /// running on the other end in a child process.
    func nativeClient(_ children: ChildList) -> AccessoryClient {
        AccessoryClient(
            transport: ChildOnSocketPair(command: self.serveCommand, children: children, log: try? self.childStderr())
        )
    }

    static func download(_ client: AccessoryClient, _ path: String) async throws -> Int {
        try await client.execute(try AccessoryRequest(url: path)) { response in
            var total = 0
            for try await buffer in response.body { total += buffer.readableBytes }
            return total
        }
    }

    /// Where the caller of the native API runs: on Swift's global concurrent pool (what an
    /// application gets by default), or on the link's event loop (`withTaskExecutorPreference(
    /// client.taskExecutor)`, the documented way to make many small requests without a thread
    /// hop per request).
    enum CallerExecutor: CaseIterable {
        case pool
        case link

        var suffix: String { self == .pool ? "" : CallerOnLink.suffix }

        func run<T>(_ client: AccessoryClient, _ body: () async throws -> T) async throws -> T {
            let executor: any TaskExecutor = self == .pool ? globalConcurrentExecutor : client.taskExecutor
            return try await withTaskExecutorPreference(executor) { () async throws -> T in try await body() }
        }
    }

    /// MiB/s of `reps` native GETs of `/bytes/<count>` by `caller` (after one warm-up, dropped).
    func nativeDownloadRates(_ client: AccessoryClient, _ caller: CallerExecutor, bytes: Int) async throws -> [Double] {
        var rates: [Double] = []
        for _ in 0..<(self.reps + 1) {
            let start = Sys.now()
            let got = try await caller.run(client) { try await Self.download(client, "/bytes/\(bytes)") }
            guard got == bytes else { throw BenchError("a native GET got \(got) of \(bytes) bytes") }
            rates.append(Self.mibPerSecond(got, Sys.now() - start))
        }
        return Array(rates.dropFirst())
    }

    func native(into table: inout Table, bulk: Bool, status: Bool) async throws {
        let children = ChildList()
        let client = self.nativeClient(children)
        _ = try await client.data(try AccessoryRequest(url: "/status"))
        for caller in CallerExecutor.allCases where bulk {
            table.add(
                Names.nativeBulk + caller.suffix,
                "MiB/s",
                try await self.nativeDownloadRates(client, caller, bytes: self.bulkBytes),
                note: "AccessoryClient.execute, body iterated"
            )
        }
        for caller in CallerExecutor.allCases where status {
            let request = try AccessoryRequest(url: "/status")
            let responder = children.pids.withLock { $0.last }
            var rates: [Double] = [], p50: [Double] = [], p99: [Double] = []
            var clientCPU: [Double] = [], responderCPU: [Double] = []
            for rep in 0..<(self.reps + 1) {
                var latencies: [Double] = []
                latencies.reserveCapacity(self.statusCount)
                let cpuBefore = (Sys.cpuSeconds(getpid()), responder.map(Sys.cpuSeconds) ?? 0)
                let start = Sys.now()
                try await caller.run(client) {
                    for _ in 0..<self.statusCount {
                        let begin = Sys.now()
                        let (head, _) = try await client.data(request)
                        guard head.status == .ok else { throw BenchError("/status answered \(head.status)") }
                        latencies.append((Sys.now() - begin).seconds * 1e6)
                    }
                }
                if rep == 0 { continue }
                rates.append(Double(self.statusCount) / (Sys.now() - start).seconds)
                p50.append(Summary.percentile(latencies, 0.5))
                p99.append(Summary.percentile(latencies, 0.99))
                let perRequest = 1e6 / Double(self.statusCount)
                clientCPU.append((Sys.cpuSeconds(getpid()) - cpuBefore.0) * perRequest)
                if let responder { responderCPU.append((Sys.cpuSeconds(responder) - cpuBefore.1) * perRequest) }
            }
            let suffix = caller.suffix
            table.add(Names.nativeStatus + suffix, "req/s", rates, note: "AccessoryClient.data, one link")
            table.add(Names.nativeStatusP50 + suffix, "µs", p50)
            table.add(Names.nativeStatusP99 + suffix, "µs", p99)
            table.add(
                Names.nativeStatusClientCPU + suffix,
                "µs",
                clientCPU,
                note: "CPU time of the client process per request"
            )
            table.add(
                Names.nativeStatusResponderCPU + suffix,
                "µs",
                responderCPU,
                note: "CPU time of the responder per request"
            )
        }
        let opens = client.link.openCount
        await client.shutdown()
        children.reapAll()
        if opens != 1 { StandardError.write("bench: warning: the native link was opened \(opens) times\n") }
    }

    // MARK: Socketpair: the CLI

    /// Runs the CLI on one end of a socketpair (`--device stdio`) and the responder on the
    /// other; returns the CLI's and the responder's exits and the CLI's wall time.
    func runCLI(_ arguments: [String]) throws -> (cli: Sys.Exit, serve: Sys.Exit, time: Duration) {
        let run = try self.runCLI(arguments, watchingPeaks: false)
        return (run.cli, run.serve, run.time)
    }

    /// With `watchingPeaks`, also returns the peak RSS (`VmHWM`) of the CLI and the responder,
    /// polled while the CLI runs (which costs the wall time up to 2 ms).
    func runCLI(
        _ arguments: [String],
        watchingPeaks: Bool
    ) throws -> (cli: Sys.Exit, serve: Sys.Exit, time: Duration, cliPeak: Int, servePeak: Int) {
        let (cliEnd, serveEnd) = try Sys.socketPair()
        let log = try self.childStderr()
        defer { close(log) }
        let serve = try Sys.spawn(self.serveCommand, stdin: serveEnd, stdout: serveEnd, stderr: log)
        close(serveEnd)
        let start = Sys.now()
        let cli = try Sys.spawn(
            [self.cli, "--device", "stdio"] + arguments,
            stdin: cliEnd,
            stdout: cliEnd,
            stderr: log
        )
        close(cliEnd)
        let cliExit: Sys.Exit
        var peaks: [pid_t: Int] = [:]
        if watchingPeaks {
            (cliExit, peaks) = Sys.waitWatchingPeak(cli, others: [serve])
        } else {
            cliExit = Sys.wait(cli)
        }
        let time = Sys.now() - start
        let serveExit = Sys.wait(serve)
        guard cliExit.succeeded else {
            throw BenchError(
                "accessory-http \(arguments.joined(separator: " ")) failed (\(cliExit.status)); see \(self.childLog)"
            )
        }
        return (cliExit, serveExit, time, peaks[cli] ?? 0, peaks[serve] ?? 0)
    }

    func cliBulk(into table: inout Table) throws {
        var rates: [Double] = []
        for _ in 0..<self.reps {
            let run = try self.runCLI(["get", "/bytes/\(self.bulkBytes)", "-o", "/dev/null"])
            rates.append(Self.mibPerSecond(self.bulkBytes, run.time))
        }
        table.add(Names.cliBulk, "MiB/s", rates, note: "accessory-http get -o /dev/null, process start included")
    }

    // MARK: Memory

    func memory(into table: inout Table) throws {
        // The peaks are each process's own VmHWM, polled while it runs (see `waitWatchingPeak`).
        let baseline = try self.runCLI(["get", "/status", "-o", "/dev/null"], watchingPeaks: true).cliPeak
        var growth: [Double] = [], peaks: [Double] = [], servePeaks: [Double] = []
        let file = "\(self.workDir)/download.bin"
        for _ in 0..<self.reps {
            let run = try self.runCLI(["download", "/bytes/\(self.memoryBytes)", "-o", file], watchingPeaks: true)
            var info = stat()
            guard stat(file, &info) == 0, Int(info.st_size) == self.memoryBytes else {
                throw BenchError("the download is not \(self.memoryBytes) bytes")
            }
            unlink(file)
            peaks.append(Double(run.cliPeak) / 1_048_576)
            growth.append(Double(run.cliPeak - baseline) / 1_048_576)
            servePeaks.append(Double(run.servePeak) / 1_048_576)
        }
        let size = "\(self.memoryBytes >> 20) MiB"
        table.add(
            Names.memoryGrowth,
            "MiB",
            growth,
            note: "CLI download of \(size) to a file; peak RSS minus that of GET /status (\(baseline >> 20) MiB)"
        )
        table.add(Names.memoryPeak, "MiB", peaks, note: "the CLI's own peak RSS (VmHWM)")
        table.add(Names.memoryServe, "MiB", servePeaks, note: "the responder's own peak RSS (VmHWM)")
    }
}

/// Like `SocketPairTransport` with a peer that spawns the responder, but the child is started
/// before NIO takes the socket: NIO writes through a dup(2) of it that is not close-on-exec,
/// and a child that inherited that dup would keep the socket from ever reaching EOF.
struct ChildOnSocketPair: ByteStreamTransport {
    let command: [String]
    let children: ChildList
    let log: CInt?

    var description: String { "socketpair to a child's stdio" }

    func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        let (local, remote) = try Sys.socketPair()
        let pid: pid_t
        do {
            pid = try Sys.spawn(self.command, stdin: remote, stdout: remote, stderr: self.log)
        } catch {
            close(local)
            close(remote)
            throw error
        }
        close(remote)
        self.children.pids.withLock { $0.append(pid) }
        do {
            let channel = try await NIOPipeBootstrap(group: eventLoop)
                .channelInitializer(configure)
                .takingOwnershipOfDescriptor(inputOutput: local)
                .get()
            return OpenedByteStream(channel: channel)
        } catch {
            close(local)
            throw error
        }
    }
}

enum CallerOnLink {
    /// Added to a row's name when the caller ran on the link's executor.
    static let suffix = " (on the link's executor)"
}

extension Substring {
    func trimmingCharacters() -> Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" || last == "\r" { text = text.dropLast() }
        return text
    }
}
