import AccessoryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// How `serve --device stdio` ends: its stdin's end is a half-close (what was asked is still
/// answered), and a host that goes away during a download ends it.
@Suite("serve on stdio: the ends of the line")
struct StdioEndTests {
    let scratch: Scratch

    init() throws {
        self.scratch = try Scratch()
    }

    static let statusRequest = Array("GET /status HTTP/1.1\r\nHost: accessory\r\n\r\n".utf8)

    @Test func requestsPipedIntoServeAreAnsweredBeforeItExits() async throws {
        // `printf 'GET …' | accessory-http serve --device stdio`: stdin ends right after the
        // requests, as it does for a client behind socat that half-closes.
        let result = try await runCLI(
            ["serve", "--device", "stdio"],
            scratch: scratch,
            stdin: Self.statusRequest + Self.statusRequest,
            timeout: 10
        )
        #expect(result.status == 0, "\(result)")
        let answers =
            String(decoding: result.stdout, as: UTF8.self).components(separatedBy: "HTTP/1.1 200 OK").count - 1
        #expect(answers == 2, "both piped requests answered: \(result)")
        // The second body is whole: the link ended after it, not during it.
        #expect(String(decoding: result.stdout, as: UTF8.self).hasSuffix("}\n"), "\(result)")
    }

    /// The host reads part of an endless download, stops, and closes both pipes (in either
    /// order). Before the output watch, with stdin's end taken as a half-close, NIO's pipe
    /// channel could take stdout's hang-up first and then wait for room to write for ever:
    /// 8 of 16 serve processes were still running 2 s later.
    @Test func serveExitsWhenItsHostGoesAwayMidDownload() async throws {
        let binary = try CLIBinary.url()
        for round in 0..<16 {
            let process = Process()
            process.executableURL = binary
            process.arguments = ["serve", "--device", "stdio"]
            process.environment = scratch.environment()
            let (toServe, fromServe) = (Pipe(), Pipe())
            process.standardInput = toServe
            process.standardOutput = fromServe
            process.standardError = FileHandle.nullDevice
            try process.run()
            try? toServe.fileHandleForReading.close()
            try? fromServe.fileHandleForWriting.close()
            defer {
                if process.isRunning {
                    kill(process.processIdentifier, SIGKILL)
                    process.waitUntilExit()
                }
            }
            let output = fromServe.fileHandleForReading.fileDescriptor
            _ = fcntl(output, F_SETFL, fcntl(output, F_GETFL) | O_NONBLOCK)
            let request = Array("GET /bytes/1000000000 HTTP/1.1\r\nHost: accessory\r\n\r\n".utf8)
            try toServe.fileHandleForWriting.write(contentsOf: request)
            var received = 0
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            let started = ContinuousClock.now
            while received < 256 * 1024 {
                let count = buffer.withUnsafeMutableBytes { read(output, $0.baseAddress, $0.count) }
                if count > 0 {
                    received += count
                } else {
                    // A hang guard, not the bound under test: a cold serve started beside the
                    // other CLI suites on 2 cores once took over 5 s to send its first bytes.
                    try #require(ContinuousClock.now - started < TimeBounds.scaled(.seconds(30)), "no download")
                    try await Task.sleep(for: .milliseconds(2))
                }
            }
            // Stop reading until serve's writes wait for room, then hang up both ends.
            try await Task.sleep(for: .milliseconds(20 + round * 5))
            if round % 2 == 0 {
                try toServe.fileHandleForWriting.close()
                try fromServe.fileHandleForReading.close()
            } else {
                try fromServe.fileHandleForReading.close()
                try toServe.fileHandleForWriting.close()
            }
            let hungUp = ContinuousClock.now
            while process.isRunning && ContinuousClock.now - hungUp < TimeBounds.scaled(.seconds(2)) {
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(
                !process.isRunning,
                "round \(round): serve still running \(ContinuousClock.now - hungUp) after its host went away"
            )

            // The next host is answered.
            let next = try await runCLI(
                ["serve", "--device", "stdio"],
                scratch: scratch,
                stdin: Self.statusRequest,
                timeout: 10
            )
            #expect(
                next.status == 0 && String(decoding: next.stdout, as: UTF8.self).hasPrefix("HTTP/1.1 200"),
                "round \(round): \(next)"
            )
        }
    }
}
