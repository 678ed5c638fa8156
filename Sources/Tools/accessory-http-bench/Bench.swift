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
            try bench.cliUpload(into: &table)
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
