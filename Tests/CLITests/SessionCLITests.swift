import AccessoryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The session layer end to end (docs/framing.md), with real processes: `serve` on one end of a
/// socat pty pair (a serial line), CLI runs with `session=on` on the other, and the independent
/// Python implementation of the spec (Tests/Fixtures/session-peer.py) against `serve`.
@Suite("session layer: CLI", .serialized)
struct SessionCLITests {
    let scratch: Scratch

    init() throws {
        self.scratch = try Scratch()
    }

    static let sessionPeer = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/session-peer.py").path

    /// Runs `body` with the host end of a pty pair whose device end `serve` answers; both
    /// processes are ended and reaped afterwards, pass or fail.
    func withServedLine(serving options: [String] = [], _ body: (String) async throws -> Void) async throws {
        guard let socat = which("socat") else {
            Issue.record("socat is not installed")
            return
        }
        let host = scratch.file("tty-host")
        let device = scratch.file("tty-dev")
        let pair = try Child(
            executable: socat,
            arguments: ["PTY,link=\(host),raw,echo=0", "PTY,link=\(device),raw,echo=0"],
            environment: scratch.environment(),
            stdin: nil
        )
        defer {
            pair.signal(SIGKILL)
            _ = pair.process.waitUntilExitOrKill()
        }
        let linked = await eventually {
            FileManager.default.fileExists(atPath: host) && FileManager.default.fileExists(atPath: device)
        }
        try #require(linked, "socat made no ptys: \(pair.stderrSoFar)")
        let server = try startCLI(["serve", "--device", "serial:" + device] + options, scratch: scratch)
        defer {
            server.signal(SIGKILL)
            _ = server.process.waitUntilExitOrKill()
        }
        try await Task.sleep(for: .milliseconds(300))
        guard server.isRunning else {
            Issue.record("serve on a pty exited: \(await server.finish(timeout: 1))")
            return
        }
        try await body("serial:\(host)?session=on")
        #expect(server.isRunning, "serve ended: \(server.stderrSoFar)")
    }

    /// `get /status` on `device` must answer within 1 s (process start included); `nil` checks
    /// only the answer, and the caller judges the returned time.
    @discardableResult
    func expectPromptStatus(
        _ device: String,
        after what: String,
        options: [String] = [],
        within bound: Duration? = .seconds(1),
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Duration {
        let status = try await runCLI(
            ["--device", device] + options + ["get", "/status"],
            scratch: scratch,
            timeout: 10
        )
        #expect(status.status == 0, "after \(what): \(status)", sourceLocation: sourceLocation)
        #expect(status.json?["model"] is String, "after \(what): \(status)", sourceLocation: sourceLocation)
        if let bound {
            #expect(
                status.elapsed < TimeBounds.scaled(bound),
                "after \(what): /status took \(status.elapsed)",
                sourceLocation: sourceLocation
            )
        }
        return status.elapsed
    }

    /// The issue's failure: a CLI that times out 1 s into an endless download leaves the device
    /// sending; with session=on the next CLI starts clean at once.
    @Test func timeoutMidBodyThenTheNextRunIsAnsweredAtOnce() async throws {
        try await withServedLine { device in
            for attempt in 1...4 {
                let first = try await runCLI(
                    ["--device", device, "get", "--timeout", "1", "/bytes/1000000000", "-o", "/dev/null"],
                    scratch: scratch,
                    timeout: 15
                )
                #expect(first.status == 75, "attempt \(attempt): \(first)")
                #expect(
                    first.elapsed < TimeBounds.scaled(.milliseconds(2500)),
                    "attempt \(attempt): the 1 s timeout took \(first.elapsed)"
                )
                try await expectPromptStatus(device, after: "a timeout mid-body (attempt \(attempt))")
            }
        }
    }

    /// A CLI whose stdout nobody reads stops at its 1 s timeout with the device mid-body; the
    /// next run is answered within 1 s. (Before 2026-12-07 the write to stdout was not bounded
    /// by the timeout: such a run took 6 s, or never ended.)
    @Test func unreadStdoutThenTheNextRunIsAnsweredAtOnce() async throws {
        try await withServedLine { device in
            for attempt in 1...4 {
                let first = try await UnreadOutputRun.measure(
                    ["--device", device, "get", "--timeout", "1", "/bytes/1000000000"],
                    scratch: scratch
                )
                #expect(first.status == 75, "attempt \(attempt): \(first)")
                // Timed from the first byte: the 1 s began before it.
                #expect(first.seconds < 3.0 * Double(TimeBounds.factor), "attempt \(attempt): \(first)")
                try await expectPromptStatus(device, after: "a run whose stdout nobody read (attempt \(attempt))")
            }
        }
    }

    /// A CLI killed with SIGKILL in the middle of a body (it can send nothing more, not even
    /// CLOSE): 16 times, the next run is answered within 1 s.
    @Test func killedMidBodyThenTheNextRunIsAnsweredAtOnce() async throws {
        try await withServedLine { device in
            for attempt in 1...16 {
                let victim = try startCLI(["--device", device, "get", "/bytes/1000000000"], scratch: scratch)
                let streaming = await eventually(timeout: 10) { victim.stdoutCountSoFar > 64 * 1024 }
                victim.signal(SIGKILL)
                let killed = await victim.finish(timeout: 5)
                try #require(streaming, "attempt \(attempt): the download never started: \(killed)")
                #expect(killed.signaled, "attempt \(attempt): \(killed)")
                try await expectPromptStatus(device, after: "SIGKILL mid-body (attempt \(attempt))")
            }
            // A host without the session layer is still served plainly on the same line.
            let plain = try await runCLI(
                ["--device", String(device.dropLast("?session=on".count)), "get", "/status"],
                scratch: scratch,
                timeout: 10
            )
            #expect(plain.status == 0, "plain after sessions: \(plain)")
        }
    }

    /// The Python opener written from docs/framing.md alone runs its 11 checks against
    /// `serve --device stdio` (plain, start, request, ping, garbage, abandon, CRC error, bad
    /// sequence, HELLO flood, 1-byte writes, CLOSE).
    @Test func independentOpenerAgainstServe() async throws {
        guard let socat = which("socat") else {
            Issue.record("socat is not installed")
            return
        }
        let binary = try CLIBinary.url().path
        let probe = try Child(
            executable: socat,
            arguments: ["EXEC:python3 \(Self.sessionPeer) probe", "EXEC:\(binary) serve --device stdio"],
            environment: scratch.environment(),
            stdin: nil
        )
        let result = await probe.finish(timeout: 90)
        #expect(result.status == 0 && !result.timedOut, "\(result)")
        #expect(result.stderr.contains("11 of 11 checks passed"), "\(result)")
    }

    /// `-v` shows the session's frames.
    @Test func traceShowsSessionFrames() async throws {
        let result = try await runCLI(["--device", "emulator?session=on", "-v", "get", "/status"], scratch: scratch)
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("> session HELLO nonce="), "\(result)")
        #expect(result.stderr.contains("< session HELLO_ACK nonce="), "\(result)")
        #expect(result.stderr.contains("< session DATA"), "\(result)")
    }

    /// `--http2` (and `http=2`, over the session layer too) speaks HTTP/2 to `serve`'s
    /// responder, which recognises the preface; `-v` shows the HTTP/2 head.
    @Test func http2ThroughTheCLI() async throws {
        let flag = try await runCLI(["--device", "emulator", "--http2", "-v", "get", "/status"], scratch: scratch)
        #expect(flag.status == 0 && flag.json?["model"] is String, "\(flag)")
        #expect(flag.stderr.contains("> :method: GET") && flag.stderr.contains("< :status: 200"), "\(flag)")
        // HTTP/2's own frames, each way.
        #expect(flag.stderr.contains("* > h2 preface") && flag.stderr.contains("* > h2 SETTINGS stream=0"), "\(flag)")
        #expect(
            flag.stderr.contains("* < h2 SETTINGS stream=0") && flag.stderr.contains("* < h2 HEADERS stream=1"),
            "\(flag)"
        )
        try await withServedLine { device in
            let result = try await runCLI(
                ["--device", device + "&http=2", "get", "/bytes/300000", "-o", scratch.file("h2.bin")],
                scratch: scratch
            )
            #expect(result.status == 0, "\(result)")
            #expect(FileManager.default.contents(atPath: scratch.file("h2.bin"))?.count == 300_000)
            let victim = try startCLI(["--device", device + "&http=2", "get", "/bytes/1000000000"], scratch: scratch)
            let streaming = await eventually(timeout: 10) { victim.stdoutCountSoFar > 64 * 1024 }
            victim.signal(SIGKILL)
            _ = await victim.finish(timeout: 5)
            #expect(streaming)
            try await expectPromptStatus(device + "&http=2", after: "SIGKILL mid-body on HTTP/2 over a session")
        }
    }

    /// Link options that cannot be used say what is wrong.
    @Test func badLinkOptionsAreExplained() async throws {
        let bad = try await runCLI(["--device", "serial:/dev/null?session=maybe", "get", "/status"], scratch: scratch)
        #expect(bad.status == 64 && bad.stderr.contains("session=maybe must be off, on or auto"), "\(bad)")
        let badHTTP = try await runCLI(["--device", "emulator?http=3", "get", "/status"], scratch: scratch)
        #expect(badHTTP.status == 64 && badHTTP.stderr.contains("http=3 must be 1.1 or 2"), "\(badHTTP)")
        let silent = try await runCLI(
            ["--device", "exec:sleep 30", "--session", "get", "/status"],
            scratch: scratch,
            timeout: 15
        )
        #expect(silent.status != 0 && silent.stderr.contains("did not answer HELLO"), "\(silent)")
        #expect(silent.elapsed < TimeBounds.scaled(.seconds(6)), "\(silent)")
    }
}

extension Process {
    /// Waits (bounded) for the process to be reaped after a SIGKILL.
    func waitUntilExitOrKill() -> Bool {
        for _ in 0..<300 where self.isRunning { usleep(10_000) }
        return !self.isRunning
    }
}
