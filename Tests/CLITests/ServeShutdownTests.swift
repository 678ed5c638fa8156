import AccessoryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `serve` on SIGTERM shuts down gracefully: a download under way is finished whole (an HTTP/2
/// client gets GOAWAY first), then the server exits; a second server on the same socket answers
/// the next request. Before 2026-11-30, SIGTERM cancelled everything at once: curl ended with
/// exit 18 (HTTP/1.1, partial file) or 92 (HTTP/2, stream error).
@Suite("serve: graceful shutdown")
struct ServeShutdownTests {
    let scratch: Scratch

    init() throws {
        self.scratch = try Scratch()
    }

    @Test(.timeLimit(.minutes(2)), arguments: ["--http1.1", "--http2-prior-knowledge"])
    func aDownloadUnderWayEndsWholeOnSIGTERM(curlVersion: String) async throws {
        guard let curl = which("curl") else {
            Issue.record("curl is not installed")
            return
        }
        let socket = scratch.file("acc.sock")
        let server = try startCLI(["serve", "--device", "unix:" + socket], scratch: scratch)
        let listening = await eventually { FileManager.default.fileExists(atPath: socket) || !server.isRunning }
        guard listening, server.isRunning else {
            Issue.record("the server did not start listening: \(await server.finish(timeout: 2))")
            return
        }
        // 16 MB at 4 MB/s: about 4 s, most of it after the signal.
        let count = 16_000_000
        let path = scratch.file("download.bin")
        let download = try Child(
            executable: curl,
            arguments: [
                "-sS", curlVersion, "--limit-rate", "4M", "--max-time", "30", "--unix-socket", socket,
                "-o", path, "http://x/bytes/\(count)",
            ],
            environment: scratch.environment(),
            stdin: nil
        )
        let started = await eventually { (readFile(path)?.count ?? 0) > 500_000 || !download.isRunning }
        #expect(started && download.isRunning, "the download did not get going")
        server.signal(SIGTERM)
        let curlResult = await download.finish(timeout: 20)
        #expect(curlResult.status == 0, "curl \(curlVersion): \(curlResult)")
        #expect(readFile(path).map(sha256) == Pattern.sha256(count: count), "the file is not whole")
        let serverResult = await server.finish(timeout: 3)
        #expect(
            !serverResult.timedOut && !serverResult.signaled
                && (serverResult.status == 0 || serverResult.status == 130),
            "the server did not end after its last answer: \(serverResult)"
        )

        // The next request, to the next server on the same socket.
        let next = try startCLI(["serve", "--device", "unix:" + socket], scratch: scratch)
        defer { next.signal(SIGKILL) }
        _ = await eventually { FileManager.default.fileExists(atPath: socket) || !next.isRunning }
        // curl, not the CLI: a CLI run waits for its turn among the suite's (Gate.cli), which is
        // no bound on the server. --max-time is the bound.
        let status = try await run(
            curl,
            ["-sS", "--max-time", TimeBounds.sanitized ? "20" : "5", "--unix-socket", socket, "http://x/status"],
            scratch: scratch
        )
        #expect(status.status == 0 && status.json?["model"] is String, "the next request: \(status)")
        next.signal(SIGTERM)
        let nextResult = await next.finish(timeout: 5)
        #expect(!nextResult.timedOut, "an idle server did not stop on SIGTERM: \(nextResult)")
    }
}
