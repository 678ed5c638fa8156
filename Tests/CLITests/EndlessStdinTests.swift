import AccessoryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `-d @-` reads stdin whole before the request (as curl does). A stdin that never ends must
/// not hold the run past `--timeout`, nor past SIGINT: before 2026-12-07 the read blocked, and a
/// run with `--timeout 1` ended only when stdin did. Stdin here is a FIFO opened read-write: it
/// has a writer (the CLI itself) and never ends.
@Suite struct EndlessStdinTests {
    let scratch: Scratch

    init() throws {
        self.scratch = try Scratch()
    }

    /// Starts `post -d @- /echo` with `options` on an endless stdin, waits until it waits for
    /// stdin (a thread in poll(2); NIO's event loops wait in epoll_wait), runs `then`, and
    /// returns how the run ended and how long after `then` it did.
    func runOnEndlessStdin(_ options: [String], then: (Child) -> Void) async throws -> (RunResult, Duration) {
        let fifo = scratch.file("stdin.fifo")
        try #require(mkfifo(fifo, 0o600) == 0)
        let binary = try CLIBinary.url().path
        await Gate.cli.enter()
        defer { Task { await Gate.cli.leave() } }
        let child = try Child(
            executable: URL(fileURLWithPath: "/bin/sh"),
            arguments: [
                "-c", "exec \"$0\" --device emulator post \(options.joined(separator: " ")) -d @- /echo 0<>\"$1\"",
                binary, fifo,
            ],
            environment: scratch.environment(),
            stdin: nil
        )
        defer {
            if child.isRunning { child.signal(SIGKILL) }
            _ = child.process.waitUntilExitOrKill()
        }
        // (Or it has ended already: a starved test process may look only after its timeout.)
        let waiting = await eventually { Self.aThreadPolls(child.pid) || !child.isRunning }
        try #require(waiting, "the CLI never waited for stdin: \(child.stderrSoFar)")
        let started = ContinuousClock.now
        then(child)
        let result = await child.finish(timeout: 20)
        return (result, ContinuousClock.now - started)
    }

    @Test func anEndlessStdinEndsTheRunAtItsTimeout() async throws {
        let (result, took) = try await runOnEndlessStdin(["--timeout", "1"]) { _ in }
        #expect(result.status == 75, "\(result)")
        // Timed from the wait for stdin: the 1 s began before it.
        // Room for a loaded CI machine's shutdown and exit: the old code waited for stdin's end.
        #expect(took < TimeBounds.scaled(.seconds(3)), "the run ended \(took) into its wait: \(result)")
        #expect(result.stderr.contains("-d @- read stdin, which did not end"), "\(result)")
    }

    @Test func anEndlessStdinEndsTheRunAtSIGINT() async throws {
        let (result, took) = try await runOnEndlessStdin([]) { $0.signal(SIGINT) }
        #expect(result.status == 130, "\(result)")
        #expect(took < TimeBounds.scaled(.milliseconds(2500)), "SIGINT took \(took) to end the run: \(result)")
    }

    /// Whether a thread of `pid` is in poll(2) or ppoll(2) (/proc/PID/task/*/syscall).
    static func aThreadPolls(_ pid: Int32) -> Bool {
        #if arch(x86_64)
            let numbers: Set<Substring> = ["7", "271"]
        #elseif arch(arm64)
            let numbers: Set<Substring> = ["73"]
        #else
            let numbers: Set<Substring> = []
        #endif
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.contains { task in
            let line = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/syscall", encoding: .utf8)) ?? ""
            return line.split(separator: " ").first.map(numbers.contains) ?? false
        }
    }
}
