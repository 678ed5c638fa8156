import AccessoryTestSupport
import Foundation
import Testing

/// `-d @TTY`: a terminal's ^D ends the body once, and it is used up by the read that meets it.
/// A reader that takes bytes and the ^D in one piece must end the body there: the first version
/// of the 256 KiB pipe reader (2026-12-07) dropped that end, expecting the next read to find it
/// again, and waited for the timeout instead.
@Suite struct TerminalBodyTests {
    @Test func aTerminalBodyEndsAtItsControlD() async throws {
        let scratch = try Scratch()
        // A pty whose line holds "hello\n" and then ^D (canonical mode) before the CLI reads it;
        // prints the CLI's status and the body the device echoed back.
        let script = """
            import json, os, pty, subprocess, sys
            master, slave = pty.openpty()
            os.write(master, b"hello\\n\\x04")
            child = subprocess.run(
                [sys.argv[1], "--device", "emulator", "post", "--timeout", "10", "-d", "@" + os.ttyname(slave), "/echo"],
                stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
            body = json.loads(child.stdout or b"{}").get("body")
            print(child.returncode, json.dumps(body), child.stderr.decode(errors="replace").strip())
            """
        let result = try await Gate.cli.admitting {
            try await run(
                URL(fileURLWithPath: "/usr/bin/python3"),
                ["-c", script, try CLIBinary.url().path],
                scratch: scratch,
                timeout: 40
            )
        }
        let line = result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(line.hasPrefix("0 \"hello\\n\""), "the run printed: \(result)")
        #expect(result.elapsed < TimeBounds.scaled(.seconds(8)), "\(result)")
    }
}
