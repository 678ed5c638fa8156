import AccessoryClient
import AccessorySession
import AccessoryTransport
import ArgumentParser
import Glibc

/// `loop`: one native client repeating one GET against a child on a socketpair for a while, and
/// nothing else, so `perf record -p` (or `perf stat`) sees one path alone. Prints requests per
/// second, or MiB/s for a body over 1 MiB.
struct Loop: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loop",
        abstract: "Repeat one GET over a socketpair to a child, for profiling one path alone."
    )

    @Option(help: "The HTTP version on the link: 1.1 or 2.") var http = "1.1"
    @Option(help: "The session layer under HTTP: on or off.") var session = "off"
    @Option(help: "The request's target.") var path = "/status"
    @Option(help: "Seconds to run.") var seconds = 10.0
    @Option(help: "Concurrent callers.") var callers = 1
    @Option(
        help: """
            Where the callers run: pool (Swift's global pool) or link (the link's event loop); or \
            bare: instead of our client, the bench's bare NIO HTTP/2 client (one caller, --http 2).
            """
    )
    var caller = "pool"
    @Option(help: "Each request's timeout in seconds (a deadline the link keeps); none by default.")
    var timeout: Double?
    @Argument(help: "The device command, its stdio the socketpair (e.g. accessory-http serve --device stdio).")
    var command: [String]

    func run() async throws {
        if self.caller == "bare" {
            try await self.measureBare()
            return
        }
        let children = ChildList()
        defer { children.reapAll() }
        var configuration = AccessoryClient.Configuration()
        switch self.http {
        case "1.1": break
        case "2": configuration.link.httpVersion = .http2
        default: throw ValidationError("--http takes 1.1 or 2, not \(self.http)")
        }
        let line = ChildOnSocketPair(command: self.command, children: children, log: nil)
        let transport: any ByteStreamTransport
        switch self.session {
        case "off": transport = line
        case "on": transport = SessionTransport(wrapping: line)
        default: throw ValidationError("--session takes on or off, not \(self.session)")
        }
        let client = AccessoryClient(transport: transport, configuration: configuration)
        var request = try AccessoryRequest(url: self.path)
        request.timeout = self.timeout.map { .milliseconds(Int($0 * 1000)) }
        do {
            try await self.measure(client, request)
        } catch {
            await client.shutdown()  // the child ends at the end of its input, and is reaped
            throw error
        }
        await client.shutdown()
    }

    private func measure(_ client: AccessoryClient, _ request: AccessoryRequest) async throws {
        _ = try await client.data(request, maxBodySize: .max)
        let start = Sys.now()
        let end = start.advanced(by: .milliseconds(Int(self.seconds * 1000)))
        guard ["pool", "link"].contains(self.caller) else { throw ValidationError("--caller takes pool or link") }
        let onLink = self.caller == "link"
        let counts = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for _ in 0..<max(1, self.callers) {
                group.addTask(executorPreference: onLink ? client.taskExecutor : globalConcurrentExecutor) {
                    var requests = 0, bytes = 0
                    while Sys.now() < end {
                        // Read and dropped, as the bench's bulk rows do.
                        bytes += try await client.execute(request) { response in
                            var total = 0
                            for try await buffer in response.body { total += buffer.readableBytes }
                            return total
                        }
                        requests += 1
                    }
                    return (requests, bytes)
                }
            }
            return try await group.reduce((0, 0)) { ($0.0 + $1.0, $0.1 + $1.1) }
        }
        let elapsed = (Sys.now() - start).seconds
        if counts.1 / max(1, counts.0) > 1 << 20 {
            print(String(format: "%.0f MiB/s", Double(counts.1) / elapsed / 1_048_576))
        } else {
            print(String(format: "%.0f req/s", Double(counts.0) / elapsed))
        }
    }

    /// The same loop with the bare NIO HTTP/2 client: the floor our client is compared with.
    private func measureBare() async throws {
        guard self.http == "2", self.session == "off", self.callers == 1 else {
            throw ValidationError("--caller bare takes --http 2, no session, one caller")
        }
        let connection = try await BareH2Connection.open(self.command, stderr: 2)
        _ = try await connection.ping(self.path, count: 1)
        let start = Sys.now()
        let end = start.advanced(by: .milliseconds(Int(self.seconds * 1000)))
        var requests = 0
        while Sys.now() < end {
            requests += try await connection.ping(self.path, count: 16).count
        }
        let elapsed = (Sys.now() - start).seconds
        try await connection.close()
        if let size = Int(self.path.split(separator: "/").last ?? ""), size > 1 << 20 {
            print(String(format: "%.0f MiB/s", Double(requests * size) / elapsed / 1_048_576))
        } else {
            print(String(format: "%.0f req/s", Double(requests) / elapsed))
        }
    }
}
