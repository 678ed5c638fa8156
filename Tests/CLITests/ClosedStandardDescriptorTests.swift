import AccessoryTestSupport
import Foundation
import Testing

/// The CLI started with stdin, stdout or stderr closed (`<&-`, `>&-`, `2>&-`, or a spawner that
/// closed them). The next descriptor opened takes the lowest free number, and here that was NIO's
/// eventfd: before 2026-12-07, `-d @- <&-` read NIO's wake-ups as the body and, starved of them,
/// the run waited until its timeout, blaming a stdin "which did not end"; the -v trace and the
/// body went into the eventfd too. Now /dev/null holds the number, reading stdin and writing
/// stdout fail at once with EBADF (as curl's do), and stderr's text is dropped.
@Suite struct ClosedStandardDescriptorTests {
    let scratch: Scratch

    init() throws {
        self.scratch = try Scratch()
    }

    /// Runs the CLI through `sh`, which closes `redirection`'s descriptor first.
    private func runClosing(_ redirection: String, _ arguments: [String]) async throws -> RunResult {
        let binary = try CLIBinary.url().path
        return try await Gate.cli.admitting {
            try await run(
                URL(fileURLWithPath: "/bin/sh"),
                ["-c", "exec \"$0\" \"$@\" \(redirection)", binary] + arguments,
                scratch: scratch,
                timeout: 20
            )
        }
    }

    @Test func aClosedStdinFailsDashDAtOnce() async throws {
        let result = try await runClosing(
            "<&-",
            ["--device", "emulator", "post", "--timeout", "5", "-d", "@-", "/echo"]
        )
        #expect(result.status == 74, "\(result)")
        #expect(result.stderr.contains("cannot read stdin: Bad file descriptor"), "\(result)")
        // The old run took the whole 5 s.
        #expect(result.elapsed < TimeBounds.scaled(.seconds(4)), "\(result)")
    }

    @Test func aClosedStdoutFailsTheBodysWrite() async throws {
        let result = try await runClosing(">&-", ["--device", "emulator", "get", "/status"])
        #expect(result.status == 74, "\(result)")
        #expect(result.stderr.contains("cannot write stdout: Bad file descriptor"), "\(result)")
    }

    /// `--device stdio` carries the link on stdin and stdout: a closed one is refused by name
    /// (it would have been /dev/null by now, which the transport refuses with less to say).
    @Test(arguments: [
        ("<&-", ["--device", "stdio", "get", "/status", "-o", "out.json"], "stdin was closed"),
        (">&-", ["serve", "--device", "stdio"], "stdout was closed"),
    ])
    func aStdioLinkOnAClosedDescriptorIsRefused(redirection: String, arguments: [String], says: String) async throws {
        let result = try await runClosing(redirection, arguments)
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains(says), "\(result)")
    }

    /// With stderr closed, the trace goes nowhere, and the body still reaches its file whole.
    /// (The old code passed this too, its trace failing with EINVAL in the eventfd: this guards
    /// that /dev/null on descriptor 2 leaves the run alone.)
    @Test func aClosedStderrLeavesTheRunAlone() async throws {
        let result = try await runClosing(
            "2>&-",
            ["--device", "emulator", "-v", "get", "/bytes/300000", "-o", "out.bin"]
        )
        #expect(result.status == 0, "\(result)")
        let body = try Data(contentsOf: scratch.url.appendingPathComponent("out.bin"))
        #expect(Array(body) == Pattern.bytes(count: 300_000))
    }
}
