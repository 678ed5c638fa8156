import Foundation
import Testing

/// `-v`: heads with `>`/`<`, body bytes as a hex dump, capped by `--trace-limit`.
@Suite("verbose trace")
struct TraceTests {
    let scratch: Scratch

    init() throws {
        self.scratch = try Scratch()
    }

    @Test func verboseShowsHeadsAndTheBodyAsHex() async throws {
        let result = try await runCLI(["--device", "emulator", "-v", "get", "/status"], scratch: scratch)
        #expect(result.status == 0, "\(result)")
        let lines = result.stderr.split(separator: "\n", omittingEmptySubsequences: false).map {
            $0.replacingOccurrences(of: "\r", with: "")
        }
        #expect(lines.contains("> GET /status HTTP/1.1"), "\(result)")
        #expect(lines.contains("< HTTP/1.1 200 OK"), "\(result)")
        #expect(lines.contains { $0.hasPrefix("< 00000000  7b 22 ") }, "the body `{\"` as hex: \(result)")
        // The body on stdout is untouched by the trace.
        #expect(result.json?["model"] is String, "\(result)")
    }

    @Test func verboseShowsTheRequestBodyToo() async throws {
        let result = try await runCLI(["--device", "emulator", "-v", "post", "/echo", "-d", "ABC"], scratch: scratch)
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("> POST /echo HTTP/1.1"), "\(result)")
        #expect(result.stderr.contains("> 00000000  41 42 43 "), "\(result)")
        #expect(result.stderr.contains("|ABC|"), "\(result)")
    }

    @Test func traceLimitCapsTheDump() async throws {
        let result = try await runCLI(
            ["--device", "emulator", "-v", "--trace-limit", "32", "get", "/bytes/1000"],
            scratch: scratch
        )
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.count == 1000, "\(result)")
        let dumpLines = result.stderr.split(separator: "\n").filter { $0.hasPrefix("< 000") }
        #expect(dumpLines.count == 2, "32 bytes are two lines of 16: \(result)")
        #expect(dumpLines.first?.hasPrefix("< 00000000  07 26 45 ") == true, "\(result)")
        #expect(dumpLines.last?.hasPrefix("< 00000010  ") == true, "\(result)")
        #expect(result.stderr.contains("968 more body bytes not shown"), "the cut is reported: \(result)")
    }

    @Test func traceLimitZeroShowsHeadsOnly() async throws {
        let result = try await runCLI(
            ["--device", "emulator", "-v", "--trace-limit", "0", "get", "/status"],
            scratch: scratch
        )
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("< HTTP/1.1 200 OK"), "\(result)")
        #expect(!result.stderr.contains("< 00000000"), "\(result)")
    }

    @Test func withoutVerboseStderrIsQuiet() async throws {
        let result = try await runCLI(["--device", "emulator", "get", "/redirect/2"], scratch: scratch)
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.isEmpty, "\(result)")
    }
}
