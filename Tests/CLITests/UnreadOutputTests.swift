import AccessoryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// How a run ended whose stdout nobody read (Tests/Fixtures/unread-stdout.py).
struct UnreadOutputRun: CustomStringConvertible {
    /// The exit status, `-N` for signal N; `nil` if the run was still going 30 s on (or
    /// wrote nothing for 30 s).
    let status: Int32?
    /// From the first byte written (the exchange under way, start-up not counted), or from
    /// the SIGINT.
    let seconds: Double
    let stderr: String

    var description: String { "status \(status.map(String.init) ?? "hung") after \(seconds) s: \(stderr)" }

    static let harness = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/unread-stdout.py").path

    /// Runs the CLI with `arguments`, stdout a pipe (or a `socket`) nobody reads, or with
    /// `unreadStderr` stderr such a pipe (and stdout /dev/null); with `interrupt`, sends SIGINT
    /// once the pipe is full and times the run from then.
    static func measure(
        _ arguments: [String],
        interrupt: Bool = false,
        socket: Bool = false,
        unreadStderr: Bool = false,
        scratch: Scratch
    ) async throws -> Self {
        // One of the few CLI runs at a time, as runCLI's: these runs are timed.
        let result = try await Gate.cli.admitting {
            try await run(
                URL(fileURLWithPath: "/usr/bin/python3"),
                [
                    harness,
                    (interrupt ? "interrupt" : "exit") + (socket ? "-socket" : unreadStderr ? "-stderr" : ""),
                    try CLIBinary.url().path,
                ]
                    + arguments,
                scratch: scratch,
                // Beyond the harness's own worst case (30 s for the first byte, 30 s for the exit).
                timeout: 75
            )
        }
        let lines = result.stdoutText.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
        let fields = lines.first?.split(separator: " ") ?? []
        guard fields.count == 2, let seconds = Double(fields[1]) else {
            Issue.record("the harness printed: \(result)")
            return Self(status: nil, seconds: .infinity, stderr: result.stderr)
        }
        return Self(
            status: Int32(fields[0]),
            seconds: seconds,
            stderr: lines.count > 1 ? String(lines[1]) : ""
        )
    }
}

/// The CLI writes the body to stdout itself; a pipe nobody reads (`accessory-http get … | cmd`
/// where cmd is stuck) must not hold it past `--timeout`, nor past SIGINT. Before 2026-12-07 the
/// write blocked on the link's event loop: with the emulator the run never ended, with either.
@Suite struct UnreadOutputTests {
    let scratch: Scratch
    /// `--timeout` for a run whose message says the output stopped it: the first byte must be
    /// out before it expires. Under AddressSanitizer, beside the target's other CLI runs, it
    /// was not within 1 s once (2026-12-07: the link's own timeout spoke first).
    static let outputTimeout = TimeBounds.sanitized ? "4" : "1"

    init() throws {
        self.scratch = try Scratch()
    }

    @Test(arguments: [false, true])
    func anUnreadStdoutEndsTheRunAtItsTimeout(socket: Bool) async throws {
        let run = try await UnreadOutputRun.measure(
            ["--device", "emulator", "get", "--timeout", Self.outputTimeout, "/bytes/100000000"],
            socket: socket,
            scratch: scratch
        )
        #expect(run.status == 75, "\(run)")
        // Timed from the first byte: the 1 s began before it.
        // (Bounds here leave room for a loaded CI machine's shutdown and exit: the old code
        // never ended at all.)
        #expect(run.seconds < 3.0 * Double(TimeBounds.factor), "\(run)")
        #expect(run.stderr.contains("stdout took no more output"), "\(run)")
    }

    /// `-v` traces every session frame on stderr; a stderr nobody reads filled up and blocked
    /// the link's event loop in the trace's write: until 2026-12-07 the run never ended, past
    /// `--timeout` and past SIGINT or SIGTERM (one SIGTERM from `timeout 20` left it running ten
    /// minutes on). Now the wait for stderr ends with the run's time.
    @Test func anUnreadStderrEndsTheRunAtItsTimeout() async throws {
        let run = try await UnreadOutputRun.measure(
            [
                "--device", "emulator?session=on", "-v", "get", "--timeout", "1", "/bytes/1000000000", "-o",
                "/dev/null",
            ],
            unreadStderr: true,
            scratch: scratch
        )
        #expect(run.status == 75, "\(run)")
        #expect(run.seconds < 3.0 * Double(TimeBounds.factor), "\(run)")
    }

    /// SIGINT once the pipe nobody reads is full: stdout, or stderr with the session trace.
    @Test(arguments: [false, true])
    func anUnreadOutputEndsTheRunAtSIGINT(stderr: Bool) async throws {
        let arguments =
            stderr
            ? ["--device", "emulator?session=on", "-v", "get", "/bytes/1000000000", "-o", "/dev/null"]
            : ["--device", "emulator", "get", "/bytes/100000000"]
        let run = try await UnreadOutputRun.measure(
            arguments,
            interrupt: true,
            unreadStderr: stderr,
            scratch: scratch
        )
        #expect(run.status == 130, "\(run)")
        #expect(run.seconds < 2.5 * Double(TimeBounds.factor), "\(run)")
    }

    /// `-o FIFO`: a FIFO nobody opens (opening it blocking would wait for ever), one whose
    /// reader reads nothing, and one whose reader reads everything.
    @Test func aFIFODestinationIsBoundedByTheTimeout() async throws {
        let fifo = scratch.file("out.fifo")
        try #require(mkfifo(fifo, 0o600) == 0)
        let unopened = try await runCLI(
            ["--device", "emulator", "get", "--timeout", "1", "/bytes/1000", "-o", fifo],
            scratch: scratch,
            timeout: 20
        )
        #expect(unopened.status == 75, "\(unopened)")
        // From the process's start, which a loaded CI machine stretched to 2.9 s once for 1 s
        // (the old code blocked in open(2) for ever).
        #expect(unopened.elapsed < TimeBounds.scaled(.seconds(6)), "\(unopened)")
        #expect(unopened.stderr.contains("nothing opened the FIFO"), "\(unopened)")

        // A reader (this process) that holds the FIFO open and reads nothing.
        let holder = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        try #require(holder >= 0)
        let unread = try await runCLI(
            ["--device", "emulator", "get", "--timeout", Self.outputTimeout, "/bytes/100000000", "-o", fifo],
            scratch: scratch,
            timeout: 20
        )
        // Its ends closed, the FIFO drops what the unread run left in it.
        close(holder)
        #expect(unread.status == 75, "\(unread)")
        #expect(unread.elapsed < TimeBounds.scaled(.seconds(6)), "\(unread)")
        #expect(unread.stderr.contains("\(fifo) took no more output"), "\(unread)")

        // A reader that reads: every byte arrives through the non-blocking writes.
        let reader = try Child(
            executable: URL(fileURLWithPath: "/bin/sh"),
            arguments: ["-c", "exec sha256sum < \(fifo)"],
            environment: scratch.environment(),
            stdin: nil
        )
        defer {
            if reader.isRunning { reader.signal(SIGKILL) }
            _ = reader.process.waitUntilExitOrKill()
        }
        let read = try await runCLI(
            ["--device", "emulator", "get", "--timeout", "20", "/bytes/4194304", "-o", fifo],
            scratch: scratch,
            timeout: 30
        )
        #expect(read.status == 0, "\(read)")
        let digest = await reader.finish(timeout: 10)
        #expect(digest.stdoutText.hasPrefix(Pattern.sha256(count: 4_194_304)), "\(digest)")
    }
}
