import AccessoryTransport
import AccessoryURLProtocol
import ArgumentParser
import Foundation
import Glibc
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The URLSession measurements: bulk through `AccessoryURLProtocol` with delegate streaming,
/// and peak RSS of a 1 GiB download through it.
///
/// Both use a route whose transport is the same `ChildOnSocketPair` (a socketpair to a child's
/// `serve --device stdio`) the native rows use, and a session data delegate, so the body
/// streams (AccessoryURLProtocol.docc/URLSessionOnLinux.md, *Body delivery*). The memory row runs in a child process
/// (`urlsession-download`) so that the peak RSS it reports is its own.
enum URLSessionBench {
    static let routeName = "bench"

    static func measure(_ bench: Benchmarks, into table: inout Table) async throws {
        let children = ChildList()
        let route = AccessoryRoute(
            name: Self.routeName,
            transport: ChildOnSocketPair(command: bench.serveCommand, children: children, log: try? bench.childStderr())
        )
        let delegate = StreamingDelegate(output: nil)
        let session = URLSession(configuration: .accessory([route]), delegate: delegate, delegateQueue: nil)
        var rates: [Double] = []
        do {
            _ = try await delegate.load(session, Self.url("/status"))
            for _ in 0..<(bench.reps + 1) {  // the first is a warm-up
                let start = Sys.now()
                let got = try await delegate.load(session, Self.url("/bytes/\(bench.bulkBytes)"))
                guard got == bench.bulkBytes else {
                    throw BenchError("URLSession GET got \(got) of \(bench.bulkBytes) bytes")
                }
                rates.append(Benchmarks.mibPerSecond(got, Sys.now() - start))
            }
        } catch {
            session.invalidateAndCancel()
            await AccessoryRouteTable.shared.remove(Self.routeName)
            children.reapAll()
            throw error
        }
        session.finishTasksAndInvalidate()
        await AccessoryRouteTable.shared.remove(Self.routeName)
        children.reapAll()
        table.add(
            Names.urlSessionBulk,
            "MiB/s",
            Array(rates.dropFirst()),
            note: "URLSession data delegate, didReceive bytes counted"
        )
    }

    static func memory(_ bench: Benchmarks, into table: inout Table) throws {
        let file = "\(bench.workDir)/urlsession-download.bin"
        let baseline = try Self.runChild(bench, path: "/status", output: "/dev/null")
        var growth: [Double] = [], peaks: [Double] = []
        for _ in 0..<bench.reps {
            let peak = try Self.runChild(bench, path: "/bytes/\(bench.memoryBytes)", output: file)
            var info = stat()
            guard stat(file, &info) == 0, Int(info.st_size) == bench.memoryBytes else {
                throw BenchError("the URLSession download is not \(bench.memoryBytes) bytes")
            }
            unlink(file)
            peaks.append(Double(peak) / 1_048_576)
            growth.append(Double(peak - baseline) / 1_048_576)
        }
        let size = "\(bench.memoryBytes >> 20) MiB"
        table.add(
            Names.urlSessionMemory,
            "MiB",
            growth,
            note:
                "URLSession delegate download of \(size) to a file, in a child; peak RSS minus that of GET /status (\(baseline >> 20) MiB)"
        )
        table.add(Names.urlSessionMemoryPeak, "MiB", peaks, note: "the URLSession child's peak RSS")
    }

    /// Runs `urlsession-download PATH OUTPUT` in a child and returns the peak RSS it reports
    /// for itself (its own VmHWM, so neither the responder it reaps nor this process counts).
    static func runChild(_ bench: Benchmarks, path: String, output: String) throws -> Int {
        let report = "\(bench.workDir)/urlsession-rss"
        unlink(report)
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        guard null >= 0 else { throw BenchError("cannot open /dev/null") }
        defer { close(null) }
        let log = try bench.childStderr()
        defer { close(log) }
        let pid = try Sys.spawn(
            [bench.selfPath, "urlsession-download", "--cli", bench.cli, path, output, report],
            stdin: null,
            stdout: null,
            stderr: log
        )
        guard Sys.wait(pid).succeeded else {
            throw BenchError("urlsession-download \(path) failed; see \(bench.childLog)")
        }
        guard let peak = Int(Sys.readFile(report).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw BenchError("urlsession-download \(path) reported no peak RSS")
        }
        return peak
    }

    static func url(_ path: String) throws -> URL {
        guard let url = URL(string: "accessory://\(Self.routeName)\(path)") else {
            throw BenchError("not a URL: accessory://\(Self.routeName)\(path)")
        }
        return url
    }
}

/// `urlsession-download --cli CLI PATH OUTPUT REPORT`: GETs `accessory://bench/PATH` through a
/// URLSession data delegate, the responder being `CLI serve --device stdio` on a socketpair,
/// writes the body to OUTPUT as it arrives, and writes its own peak RSS in bytes to REPORT.
struct URLSessionDownload: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "urlsession-download", shouldDisplay: false)
    @Option var cli: String
    @Argument var path: String
    @Argument var output: String
    @Argument var report: String

    func run() async throws {
        let fd = open(self.output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw BenchError("cannot open \(self.output)") }
        defer { close(fd) }
        let children = ChildList()
        let route = AccessoryRoute(
            name: URLSessionBench.routeName,
            transport: ChildOnSocketPair(command: [self.cli, "serve", "--device", "stdio"], children: children, log: 2)
        )
        let delegate = StreamingDelegate(output: fd)
        let session = URLSession(configuration: .accessory([route]), delegate: delegate, delegateQueue: nil)
        _ = try await delegate.load(session, URLSessionBench.url(self.path))
        session.finishTasksAndInvalidate()
        await AccessoryRouteTable.shared.remove(URLSessionBench.routeName)
        children.reapAll()
        // VmHWM, not `getrusage`: `ru_maxrss` carries the parent's peak over `posix_spawn`
        // (vfork + exec), VmHWM is this process's own address space only.
        guard
            let line = Sys.readFile("/proc/self/status").split(separator: "\n").first(where: {
                $0.hasPrefix("VmHWM:")
            }),
            let kib = Int(line.dropFirst("VmHWM:".count).trimmingCharacters().dropLast(3).trimmingCharacters())
        else { throw BenchError("no VmHWM in /proc/self/status") }
        let text = "\(kib * 1024)\n"
        let reportFD = open(self.report, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard reportFD >= 0 else { throw BenchError("cannot open \(self.report)") }
        defer { close(reportFD) }
        try Sys.writeAll(reportFD, Array(text.utf8))
    }
}

/// A session data delegate for one task at a time: counts the `didReceive data` bytes and,
/// with an output descriptor, writes them there as they arrive (the body is never kept).
final class StreamingDelegate: NSObject, URLSessionDataDelegate, Sendable {
    struct State {
        var received = 0
        var status: Int?
        var failure: String?
        var waiting: CheckedContinuation<Int, any Error>?
    }

    let output: CInt?
    let state = TrackedMutex(State())

    init(output: CInt?) { self.output = output }

    /// Runs one data task to completion; returns the number of body bytes received.
    func load(_ session: URLSession, _ url: URL) async throws -> Int {
        try await withCheckedThrowingContinuation { continuation in
            self.state.withLock { $0 = State(waiting: continuation) }
            session.dataTask(with: url).resume()
        }
    }

    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        let status = (response as? HTTPURLResponse)?.statusCode
        self.state.withLock { $0.status = status }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        if let output = self.output {
            do {
                try data.withUnsafeBytes { try Sys.writeAll(output, $0) }
            } catch {
                self.state.withLock { $0.failure = "writing the body: \(error)" }
                dataTask.cancel()
                return
            }
        }
        self.state.withLock { $0.received += data.count }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let (waiting, received, status, failure) = self.state.withLock { state in
            defer { state.waiting = nil }
            return (state.waiting, state.received, state.status, state.failure)
        }
        if let failure {
            waiting?.resume(throwing: BenchError(failure))
        } else if let error {
            waiting?.resume(throwing: BenchError("URLSession task failed: \(error)"))
        } else if status != 200 {
            waiting?.resume(throwing: BenchError("URLSession task answered \(status.map(String.init) ?? "no status")"))
        } else {
            waiting?.resume(returning: received)
        }
    }
}
