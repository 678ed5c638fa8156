import AccessoryTestSupport
import Foundation
import Testing

/// A CLI whose stdout is a non-blocking pipe (the flag belongs to the pipe, so a parent that
/// set it, as Node.js does for its children's pipes, sets it for the CLI) with a reader that
/// falls behind: the output waits for the reader. Before 2026-12-06 the CLI retried the write
/// at once on EAGAIN, spinning a core for as long as the reader was away.
@Suite struct NonBlockingStdoutTests {
    /// A Python parent makes the pipe non-blocking, starts `get /bytes/4194304`, reads nothing
    /// for 1.5 s (6 s under a sanitizer), then everything; it prints the child's status, the bytes read and the CPU
    /// seconds the child used (wait4). Every byte arrives, and the CLI used under half the
    /// time it would have spun.
    @Test func aSlowReaderOnANonBlockingPipeCostsNoCPU() async throws {
        let scratch = try Scratch()
        // Longer under a sanitizer, whose CLI start-up alone costs about a second of CPU: the
        // old spin cost as much CPU as the reader was away.
        let away = TimeBounds.sanitized ? 6.0 : 1.5
        let script = """
            import fcntl, os, subprocess, sys, time
            r, w = os.pipe()
            fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
            child = subprocess.Popen(sys.argv[2:], stdout=w)
            os.close(w)
            time.sleep(float(sys.argv[1]))
            count = 0
            while True:
                chunk = os.read(r, 1 << 16)
                if not chunk:
                    break
                count += len(chunk)
            _, status, usage = os.wait4(child.pid, 0)
            print(os.waitstatus_to_exitcode(status), count, usage.ru_utime + usage.ru_stime)
            """
        let result = try await run(
            URL(fileURLWithPath: "/usr/bin/python3"),
            ["-c", script, "\(away)", try CLIBinary.url().path, "--device", "emulator", "get", "/bytes/4194304"],
            scratch: scratch,
            timeout: 60
        )
        let fields = String(decoding: result.stdout, as: UTF8.self).split(whereSeparator: \.isWhitespace)
        try #require(fields.count == 3, "the parent printed: \(result)")
        #expect(fields[0] == "0", "the CLI exited \(fields[0]): \(result.stderr)")
        #expect(fields[1] == "4194304", "the reader got \(fields[1]) bytes")
        let cpu = try #require(Double(fields[2]))
        #expect(
            cpu < away / 2,
            "the CLI used \(cpu) s of CPU while its reader was away \(away) s"
        )
    }
}
