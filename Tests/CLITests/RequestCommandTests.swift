import AccessoryTestSupport
import Foundation
import Testing

/// The request commands against `--device emulator` (the emulated accessory in the CLI's own process).
@Suite("request commands")
struct RequestCommandTests {
    let scratch: Scratch

    init() throws {
        self.scratch = try Scratch()
    }

    func cli(
        _ arguments: [String],
        stdin: [UInt8]? = nil,
        env: [String: String] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> RunResult {
        try await runCLI(arguments, scratch: self.scratch, env: env, stdin: stdin, sourceLocation: sourceLocation)
    }

    /// `--compressed`, as curl: asks for gzip and writes the body decoded; without it the bytes
    /// are written as the device sent them. Against a Python device that always gzips.
    @Test func compressedAsksForGzipAndWritesTheBodyDecoded() async throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/gzip-device.py").path
        let text = String(repeating: "hello, compressed world\n", count: 20)
        let decoded = try await cli(["--device", "exec:python3 \(script)", "get", "--compressed", "-i", "/text"])
        #expect(decoded.status == 0, "\(decoded)")
        #expect(decoded.stdoutText.hasSuffix("\r\n\r\n" + text), "\(decoded)")
        #expect(decoded.stdoutText.contains("X-Seen-Accept-Encoding: deflate, gzip"), "\(decoded)")
        let raw = try await cli(["--device", "exec:python3 \(script)", "get", "/text"])
        #expect(raw.status == 0, "\(raw)")
        #expect(raw.stdout.prefix(2) == [0x1f, 0x8b], "the gzip bytes as sent: \(raw)")
    }

    /// `-i` prints trailer fields after the body, as curl does; without `-i` only the body.
    /// Over HTTP/1.1 (a chunked trailer section) and HTTP/2 (a trailing HEADERS frame), to stdout
    /// and with `-o` (where the head and trailers go to stdout, the body to the file).
    @Test(arguments: [[], ["--http2"]])
    func includePrintsTrailersAfterTheBody(flags: [String]) async throws {
        let shown = try await cli(["--device", "emulator"] + flags + ["get", "-i", "/trailers"])
        #expect(shown.status == 0, "\(shown)")
        let text = shown.stdoutText.lowercased()
        // The status line names the version the link spoke (curl's form for HTTP/2).
        #expect(text.hasPrefix(flags.isEmpty ? "http/1.1 200 ok\r\n" : "http/2 200 \r\n"), "\(shown)")
        #expect(text.contains("\r\n\r\ntrailers follow\naccessory-body-sha256: "), "\(shown)")
        #expect(text.hasSuffix("accessory-request-trailers: none\r\n"), "\(shown)")
        let plain = try await cli(["--device", "emulator"] + flags + ["get", "/trailers"])
        #expect(plain.stdoutText == "trailers follow\n", "\(plain)")
        let file = self.scratch.url.appendingPathComponent("trailers.txt").path
        let saved = try await cli(["--device", "emulator"] + flags + ["get", "-i", "-o", file, "/trailers"])
        #expect(saved.status == 0, "\(saved)")
        #expect(saved.stdoutText.lowercased().hasSuffix("accessory-request-trailers: none\r\n"), "\(saved)")
        #expect((try? String(contentsOfFile: file, encoding: .utf8)) == "trailers follow\n")
    }

    @Test func getStatusPrintsTheIdentityAsJSON() async throws {
        let result = try await cli(["--device", "emulator", "get", "/status"])
        #expect(result.status == 0, "\(result)")
        let json = try #require(result.json, "\(result)")
        #expect(json["model"] is String)
        #expect(json["serialNumber"] is String)
        #expect(json["firmwareVersion"] is String)
        #expect(json["uptimeSeconds"] is Int)
        #expect(result.stderr.isEmpty, "\(result)")
    }

    @Test func globalOptionsWorkAfterTheSubcommandToo() async throws {
        let result = try await cli(["get", "/status", "--device", "emulator"])
        #expect(result.status == 0, "\(result)")
        #expect(result.json?["model"] is String, "\(result)")
    }

    @Test func includePrintsTheHeadThenTheBody() async throws {
        let result = try await cli(["--device", "emulator", "get", "-i", "/status"])
        #expect(result.status == 0, "\(result)")
        let text = result.stdoutText
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(result)")
        let parts = text.components(separatedBy: "\r\n\r\n")
        #expect(parts.count == 2, "\(result)")
        let head = parts[0].lowercased()
        #expect(head.contains("\r\ncontent-type: application/json"), "\(result)")
        let body = parts.count == 2 ? parts[1] : ""
        let json = (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any]
        #expect(json?["model"] is String, "\(result)")
    }

    @Test func headPrintsTheHeadAndNoBody() async throws {
        let result = try await cli(["--device", "emulator", "head", "/status"])
        #expect(result.status == 0, "\(result)")
        let text = result.stdoutText
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(result)")
        #expect(text.hasSuffix("\r\n\r\n"), "\(result)")
        #expect(text.components(separatedBy: "\r\n\r\n").count == 2, "exactly one head and nothing after it: \(result)")
        #expect(!text.contains("{"), "\(result)")
    }

    @Test func deleteSendsDELETE() async throws {
        let result = try await cli(["--device", "emulator", "delete", "/echo"])
        #expect(result.status == 0, "\(result)")
        #expect(result.json?["method"] as? String == "DELETE", "\(result)")
        #expect(result.json?["bodyLength"] as? Int == 0, "\(result)")
    }

    @Test func postSendsTheDataAsGiven() async throws {
        let result = try await cli(["--device", "emulator", "post", "/echo", "-d", "hello=world&x=1"])
        #expect(result.status == 0, "\(result)")
        let json = try #require(result.json, "\(result)")
        #expect(json["method"] as? String == "POST")
        #expect(json["body"] as? String == "hello=world&x=1")
        #expect(json["bodyLength"] as? Int == 15)
    }

    @Test func postFromAFileUploadsItExactly() async throws {
        var bytes = [UInt8](repeating: 0, count: 300_001)
        for index in bytes.indices { bytes[index] = UInt8(truncatingIfNeeded: index &* 7 &+ index >> 9) }
        let path = scratch.file("upload.bin")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let result = try await cli(["--device", "emulator", "post", "/upload", "-d", "@" + path])
        #expect(result.status == 0, "\(result)")
        let json = try #require(result.json, "\(result)")
        #expect(json["length"] as? Int == bytes.count)
        #expect(json["sha256"] as? String == sha256(bytes))
    }

    @Test func postFromStandardInput() async throws {
        let bytes = Array(repeating: Array("line of stdin\n".utf8), count: 10_000).flatMap { $0 }
        let result = try await cli(["--device", "emulator", "post", "/upload", "-d", "@-"], stdin: bytes)
        #expect(result.status == 0, "\(result)")
        let json = try #require(result.json, "\(result)")
        #expect(json["length"] as? Int == bytes.count)
        #expect(json["sha256"] as? String == sha256(bytes))
    }

    /// `-d @FIFO` (a named pipe, or a shell's process substitution) is read as it comes and
    /// sent chunked, as curl sends it. Before 2026-12-06 it failed at once: "Illegal seek".
    @Test func postFromANamedPipe() async throws {
        let fifo = scratch.file("body.fifo")
        try #require(mkfifo(fifo, 0o600) == 0)
        let bytes = Array(repeating: Array("from a pipe\n".utf8), count: 30_000).flatMap { $0 }
        let source = scratch.file("source.bin")
        try Data(bytes).write(to: URL(fileURLWithPath: source))
        // The writer gives up after 20 s if the CLI never opens the pipe (it is then reaped).
        let command =
            "timeout 20 cat '\(source)' > '\(fifo)' & exec '\(try CLIBinary.url().path)' --device emulator post /upload -d '@\(fifo)'"
        let result = try await run(URL(fileURLWithPath: "/bin/sh"), ["-c", command], scratch: scratch)
        #expect(result.status == 0, "\(result)")
        let json = try #require(result.json, "\(result)")
        #expect(json["length"] as? Int == bytes.count)
        #expect(json["sha256"] as? String == sha256(bytes))
    }

    /// `-d @FIFO` whose writer opened it and went quiet (and one that never opened it): the
    /// `--timeout` ends the call on time, exit 75. Before 2026-12-06 the read of the pipe held
    /// the call until the writer ended (30 s here; the CLI was killed at 20).
    @Test(arguments: [true, false], [false, true])
    func aQuietNamedPipeEndsAtTheTimeout(writerOpens: Bool, http2: Bool) async throws {
        let fifo = scratch.file("quiet-\(writerOpens)-\(http2).fifo")
        try #require(mkfifo(fifo, 0o600) == 0)
        let writer =
            writerOpens
            ? try Child(
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: ["-c", "exec sleep 30 > '\(fifo)'"],
                environment: scratch.environment(),
                stdin: nil
            ) : nil
        let result = try await cli(
            ["--device", "emulator"] + (http2 ? ["--http2"] : []) + [
                "post", "/upload", "-d", "@" + fifo, "--timeout", "1",
            ]
        )
        writer?.signal(SIGKILL)
        _ = await writer?.finish(timeout: 5)
        #expect(result.status == 75, "\(result)")
        // The defect held the call until the test killed it at 20 s. 1.5 s alone; 3.0-4.2 s
        // in a full parallel CLITests run on two cores (2026-12-06).
        #expect(
            result.elapsed < .seconds(1) + TimeBounds.scaled(.seconds(3)),
            "the call ended after \(result.elapsed), for --timeout 1"
        )
    }

    /// A named pipe's body cannot be sent twice: a 307 that asks for it again gets a clear
    /// error at once, not the rest of the stream sent as if it were the whole body (nor a wait
    /// for a pipe whose writer is gone).
    @Test func aNamedPipeIsNotSentAgainAfterA307() async throws {
        let fifo = scratch.file("again.fifo")
        try #require(mkfifo(fifo, 0o600) == 0)
        let command =
            "timeout 20 printf hello > '\(fifo)' & exec '\(try CLIBinary.url().path)' --device emulator post '/redirect-to?url=/upload&status=307' -d '@\(fifo)' --timeout 10"
        let result = try await run(URL(fileURLWithPath: "/bin/sh"), ["-c", command], scratch: scratch)
        #expect(result.status != 0, "\(result)")
        #expect(result.stderr.contains("cannot be sent again"), "\(result)")
        // The defect ran into the --timeout 10. The call takes 0.2 s alone, 1.4-1.5 s each with
        // twelve at once; 3.1-3.7 s in full parallel CLITests runs on two cores (2026-12-06).
        #expect(result.elapsed < TimeBounds.scaled(.seconds(6)), "\(result)")
    }

    /// What a device does after answering before a request body is in.
    enum AfterAnEarlyAnswer: String, CaseIterable, Sendable {
        /// `Connection: close`: the rest of the body is not sent.
        case closesTheLink
        /// It keeps the link (and reads the body): the body must still go out.
        case keepsTheLink
        /// It keeps the link, then ends it a second later, the body still not in.
        case keepsTheLinkThenEndsIt
    }

    /// A device that answers before the body from a quiet named pipe is sent. If it closes the
    /// link, or ends it later, the answer ends the call then (the producer waiting for the pipe
    /// is cancelled); if it keeps the link, the body must still go out, and the call ends at its
    /// timeout (the producer cancelled, the link torn down), the answer already written. Before
    /// 2026-12-06 each waited for the pipe's writer to end, far past the timeout.
    @Test(arguments: AfterAnEarlyAnswer.allCases)
    func anEarlyAnswerEndsACallWhoseBodyPipeIsQuiet(_ after: AfterAnEarlyAnswer) async throws {
        let fifo = scratch.file("early-\(after).fifo")
        try #require(mkfifo(fifo, 0o600) == 0)
        let writer = try Child(
            executable: URL(fileURLWithPath: "/bin/sh"),
            arguments: ["-c", "exec sleep 30 > '\(fifo)'"],
            environment: scratch.environment(),
            stdin: nil
        )
        let answer = "HTTP/1.1 413 Payload Too Large\\r\\nContent-Length: 0\\r\\n"
        let device: String
        switch after {
        case .closesTheLink: device = "exec:read -r line; printf '\(answer)Connection: close\\r\\n\\r\\n'"
        case .keepsTheLink: device = "exec:read -r line; printf '\(answer)\\r\\n'; exec sleep 30"
        case .keepsTheLinkThenEndsIt: device = "exec:read -r line; printf '\(answer)\\r\\n'; exec sleep 1"
        }
        let timeout = after == .keepsTheLink ? "1" : "10"
        let result = try await cli([
            "--device", device, "post", "/upload", "-d", "@" + fifo, "-i", "--timeout", timeout,
        ])
        writer.signal(SIGKILL)
        _ = await writer.finish(timeout: 5)
        #expect(result.stdoutText.hasPrefix("HTTP/1.1 413"), "\(result)")
        #expect(result.status == (after == .keepsTheLink ? 75 : 0), "\(result)")
        // The defect took the test's 20 s; under 3 s alone, more in a loaded parallel run.
        #expect(result.elapsed < TimeBounds.scaled(.seconds(6)), "\(result)")
    }

    @Test func putSendsPUT() async throws {
        let result = try await cli(["--device", "emulator", "put", "/echo", "-d", "{\"a\":1}"])
        #expect(result.status == 0, "\(result)")
        #expect(result.json?["method"] as? String == "PUT", "\(result)")
        #expect(result.json?["body"] as? String == "{\"a\":1}", "\(result)")
    }

    @Test func requestSendsAnyMethod() async throws {
        let result = try await cli(["--device", "emulator", "request", "-X", "PATCH", "/echo", "-d", "x"])
        #expect(result.status == 0, "\(result)")
        #expect(result.json?["method"] as? String == "PATCH", "\(result)")
        #expect(result.json?["body"] as? String == "x", "\(result)")
    }

    @Test func requestRefusesAnInvalidMethod() async throws {
        let result = try await cli(["--device", "emulator", "request", "-X", "BAD METHOD", "/echo"])
        #expect(result.status == 64, "\(result)")
    }

    @Test func headersAreSent() async throws {
        let result = try await cli([
            "--device", "emulator", "get", "/echo", "-H", "X-Test: 1", "-H", "X-Other:  two words ",
        ])
        #expect(result.status == 0, "\(result)")
        let headers = try #require(result.json?["headers"] as? [String: String], "\(result)")
        #expect(headers["x-test"] == "1", "\(headers)")
        #expect(headers["x-other"] == "two words", "\(headers)")
    }

    @Test func outputWritesTheBodyToAFile() async throws {
        let count = 5 * 1024 * 1024
        let path = scratch.file("out.bin")
        let result = try await cli(["--device", "emulator", "get", "/bytes/\(count)", "-o", path])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
        let bytes = try #require(readFile(path))
        #expect(bytes.count == count)
        #expect(sha256(bytes) == Pattern.sha256(count: count))
    }

    @Test func downloadWithoutATerminalDrawsNoProgressBar() async throws {
        let count = 3 * 1024 * 1024 + 17
        let path = scratch.file("download.bin")
        let result = try await cli(["--device", "emulator", "download", "/stream/\(count)", "-o", path])
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.isEmpty, "no progress bar when stderr is a pipe: \(result)")
        #expect(result.stdout.isEmpty, "\(result)")
        let bytes = try #require(readFile(path))
        #expect(bytes.count == count)
        #expect(sha256(bytes) == Pattern.sha256(count: count))
    }

    @Test func downloadNeedsAnOutputFile() async throws {
        let result = try await cli(["--device", "emulator", "download", "/bytes/10"])
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains("-o"), "\(result)")
    }

    @Test func basicAuthentication() async throws {
        let good = try await cli(["--device", "emulator", "get", "--user", "alice:s3cret", "/basic-auth/alice/s3cret"])
        #expect(good.status == 0, "\(good)")
        #expect(good.json?["authenticated"] as? Bool == true, "\(good)")
        #expect(good.json?["user"] as? String == "alice", "\(good)")

        let bad = try await cli([
            "--device", "emulator", "get", "--fail", "--user", "alice:wrong", "/basic-auth/alice/s3cret",
        ])
        #expect(bad.status == 22, "\(bad)")
        #expect(bad.stdout.isEmpty, "\(bad)")
    }

    @Test(arguments: ["MD5", "SHA-256"])
    func digestAuthentication(algorithm: String) async throws {
        let result = try await cli([
            "--device", "emulator", "get", "--user", "bob:pa55", "/digest-auth/auth/bob/pa55/\(algorithm)",
        ])
        #expect(result.status == 0, "\(result)")
        #expect(result.json?["authenticated"] as? Bool == true, "\(result)")
        #expect(result.json?["user"] as? String == "bob", "\(result)")

        let wrong = try await cli([
            "--device", "emulator", "get", "-i", "--user", "bob:nope", "/digest-auth/auth/bob/pa55/\(algorithm)",
        ])
        #expect(wrong.status == 0, "without --fail a 401 is still a successful exchange: \(wrong)")
        #expect(wrong.stdoutText.hasPrefix("HTTP/1.1 401 "), "\(wrong)")
    }

    @Test func redirectsAreFollowed() async throws {
        let result = try await cli(["--device", "emulator", "get", "/redirect/3"])
        #expect(result.status == 0, "\(result)")
        #expect(result.json?["model"] is String, "ends at /status: \(result)")
    }

    @Test func maxRedirsZeroReturnsTheRedirect() async throws {
        let result = try await cli(["--device", "emulator", "get", "-i", "--max-redirs", "0", "/redirect/3"])
        #expect(result.status == 0, "\(result)")
        let text = result.stdoutText
        #expect(text.hasPrefix("HTTP/1.1 302 Found\r\n"), "\(result)")
        #expect(text.lowercased().contains("\r\nlocation: /redirect/2\r\n"), "\(result)")
    }

    @Test func tooManyRedirectsFails() async throws {
        let result = try await cli(["--device", "emulator", "get", "--max-redirs", "2", "/redirect/5"])
        #expect(result.status == 76, "\(result)")
        #expect(result.stderr.contains("redirect"), "\(result)")
    }
}

/// The progress bar of `download` appears only when stderr is a terminal (`script` gives it a pty).
@Suite("progress bar")
struct ProgressBarTests {
    let scratch: Scratch

    init() throws {
        self.scratch = try Scratch()
    }

    @Test(arguments: [("bytes", true), ("stream", false)])
    func downloadOnATerminalDrawsAProgressBar(endpoint: String, knowsLength: Bool) async throws {
        guard let script = which("script") else {
            Issue.record("script (util-linux) is not installed")
            return
        }
        let count = 3_000_000
        let path = scratch.file("tty-\(endpoint).bin")
        let command = "'\(try CLIBinary.url().path)' --device emulator download /\(endpoint)/\(count) -o '\(path)'"
        await Gate.cli.enter()
        let result = try await run(script, ["-qfec", command, "/dev/null"], scratch: scratch)
        await Gate.cli.leave()
        #expect(result.status == 0, "\(result)")
        let screen = result.stdoutText
        if knowsLength {
            #expect(screen.contains("100%"), "\(result)")
            #expect(screen.contains("2.9 MiB / 2.9 MiB"), "\(result)")
        } else {
            #expect(!screen.contains("%"), "no percentage without a length: \(result)")
            #expect(screen.contains("2.9 MiB"), "\(result)")
        }
        #expect(screen.hasSuffix("\r\n"), "the bar ends its line: \(result)")
        let bytes = readFile(path) ?? []
        #expect(bytes.count == count)
        #expect(sha256(bytes) == Pattern.sha256(count: count))
    }
}

@Suite("help and version")
struct HelpTests {
    let scratch: Scratch

    init() throws {
        self.scratch = try Scratch()
    }

    @Test func helpListsTheCommandsAndExitCodes() async throws {
        let result = try await runCLI(["--help"], scratch: scratch)
        #expect(result.status == 0, "\(result)")
        // Words as read, whatever line the help's wrapping broke them onto.
        let text = result.stdoutText.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for word in ["get", "head", "delete", "post", "put", "request", "download", "serve", "64 usage error"] {
            #expect(text.contains(word), "\(word): \(result)")
        }
    }

    @Test func versionPrintsAVersion() async throws {
        let result = try await runCLI(["--version"], scratch: scratch)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdoutText.first?.isNumber == true, "\(result)")
        #expect(result.stdoutText.contains("(commit "), "\(result)")
    }

    @Test func anUnknownSubcommandIsAUsageError() async throws {
        let result = try await runCLI(["--device", "emulator", "fetch", "/status"], scratch: scratch)
        #expect(result.status == 64, "\(result)")
    }
}
