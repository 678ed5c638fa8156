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

    /// What a device puts in a header value or reason phrase is escaped before it is printed by
    /// `-v` (stderr) and `-i` (stdout). NIO's parser refuses ESC and other C0 controls in header
    /// values, but lets C1 controls through (U+009B is an 8-bit CSI to some terminals), and
    /// U+202E (right-to-left override) can reorder what the reader sees.
    @Test func deviceTextInTheHeadIsEscaped() async throws {
        let script = scratch.file("device.sh")
        try Data(
            """
            cr=$(printf '\\r')
            while IFS= read -r line; do [ "$line" = "$cr" ] && break; done
            printf 'HTTP/1.1 200 O\\302\\233K\\r\\nX-Evil: a\\302\\2332Jb\\342\\200\\256c\\r\\nContent-Length: 2\\r\\n\\r\\nhi'
            sleep 1

            """.utf8
        ).write(to: URL(fileURLWithPath: script))
        let result = try await runCLI(
            ["--device", "exec:sh '\(script)'", "-v", "get", "-i", "/x"],
            scratch: scratch
        )
        #expect(result.status == 0, "\(result)")
        let c1: [UInt8] = [0xC2, 0x9B]
        let rlo: [UInt8] = [0xE2, 0x80, 0xAE]
        func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
            haystack.count >= needle.count
                && (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<$0 + needle.count]) == needle }
        }
        let stderr = Array(result.stderr.utf8)
        #expect(!contains(stderr, c1) && !contains(stderr, rlo), "-v printed a raw control: \(result)")
        #expect(!contains(result.stdout, c1) && !contains(result.stdout, rlo), "-i printed a raw control: \(result)")
        #expect(result.stderr.contains(#"< X-Evil: a\u{009B}2Jb\u{202E}c"#), "\(result)")
        #expect(result.stdoutText.contains("X-Evil: a\\u{009B}2Jb\\u{202E}c\r\n"), "\(result)")
        #expect(result.stdoutText.hasSuffix("\r\n\r\nhi"), "the body itself is not touched: \(result)")
    }
}
