import AccessoryClient
import AccessoryEmulator
import AccessoryHTTP1
import AccessoryTransport
import ArgumentParser
import Glibc
import NIOCore
import NIOPosix
import Synchronization

/// The native client's rows on a socketpair.
extension Benchmarks {
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
}
