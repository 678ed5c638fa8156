import AccessoryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// An `exec:` device runs in a process group of its own, and ending the link ends the whole
/// group: a command that is a wrapper (a shell, pyenv's `python3`, a virtualenv) leaves none of
/// its children behind, whatever way the CLI ends.
@Suite("exec: device process groups", .serialized)
struct ExecDeviceGroupTests {
    let scratch: Scratch
    /// In the command line of every process a test's device starts, to find survivors.
    let marker = "accessory-http-group-test-\(UInt64.random(in: 0...UInt64.max))"

    init() throws {
        self.scratch = try Scratch()
    }

    static let stdioDevice = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/stdio-device.py").path

    /// A shell that runs `inner` as its child (`; true` keeps the shell from exec'ing it), so the
    /// device is a grandchild of the CLI, as behind any wrapper script.
    func wrapped(_ inner: String) -> String {
        "exec:sh -c '\(inner) \(self.marker); true'"
    }

    /// A grandchild that never answers and ignores SIGTERM: only the group's SIGKILL ends it.
    var stubbornGrandchild: String {
        wrapped("python3 -c \"import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)\"")
    }

    /// The pids of processes whose command line holds the marker.
    func survivors() -> [String] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.filter { $0.allSatisfy(\.isNumber) }.filter { pid in
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
            return String(decoding: data, as: UTF8.self).contains(self.marker)
        }
    }

    /// Nothing of the device's group is left once the CLI has exited (it waits for the group).
    func expectNoSurvivors(_ result: RunResult, sourceLocation: SourceLocation = #_sourceLocation) {
        let left = self.survivors()
        #expect(
            left.isEmpty,
            "processes of the device's group outlived the CLI: \(left); \(result)",
            sourceLocation: sourceLocation
        )
        for pid in left { _ = kill(pid_t(pid) ?? 0, SIGKILL) }
    }

    @Test func onSuccess() async throws {
        let result = try await runCLI(
            ["--device", wrapped("python3 \(Self.stdioDevice)"), "get", "/status"],
            scratch: scratch,
            timeout: 15
        )
        #expect(result.status == 0, "\(result)")
        #expect(result.stdoutText.contains("python on stdio"), "\(result)")
        expectNoSurvivors(result)
    }

    @Test func onATimeout() async throws {
        let result = try await runCLI(
            ["--device", stubbornGrandchild, "get", "--timeout", "1", "/status"],
            scratch: scratch,
            timeout: 15
        )
        #expect(result.status == 75, "\(result)")
        expectNoSurvivors(result)
    }

    @Test func onAProtocolError() async throws {
        let device = wrapped(
            "printf \"garbage\\r\\n\\r\\n\"; python3 -c \"import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)\""
        )
        let result = try await runCLI(["--device", device, "get", "/status"], scratch: scratch, timeout: 15)
        #expect(result.status == 76, "\(result)")
        expectNoSurvivors(result)
    }

    @Test func onSIGINT() async throws {
        let child = try startCLI(["--device", stubbornGrandchild, "-v", "get", "/status"], scratch: scratch)
        let sent = await eventually { child.stderrSoFar.contains("> GET /status") || !child.isRunning }
        #expect(sent, "the request was never sent: \(child.stderrSoFar)")
        #expect(await eventually { !self.survivors().isEmpty }, "the device never started")
        child.signal(SIGINT)
        let result = await child.finish(timeout: 10)
        #expect(result.status == 130, "\(result)")
        expectNoSurvivors(result)
    }

    /// A member of the device's group that exits after the device (a shell's background job)
    /// is adopted by the nearest subreaper; one that does not reap it (a container without an
    /// init, a supervisor that waits only for its own child) leaves it a zombie. The CLI's wait
    /// for the group counted zombies and ran to its 2 s limit every time (2.3 s before
    /// 2026-12-06, against 0.5 s now, the 0.3 s job included). The CLI runs under a Python
    /// subreaper that reaps nothing but the CLI.
    @Test func aZombieOfTheGroupDoesNotHoldTheExit() async throws {
        let subreaper =
            "import ctypes, subprocess, sys; ctypes.CDLL(None).prctl(36, 1, 0, 0, 0); "
            + "sys.exit(subprocess.run(sys.argv[1:]).returncode)"
        let result = try await run(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "python3", "-c", subreaper, try CLIBinary.url().path,
                "--device", "exec:sleep 0.3 & exec python3 \(Self.stdioDevice) \(self.marker)", "get", "/status",
            ],
            scratch: scratch,
            timeout: 15
        )
        #expect(result.status == 0, "\(result)")
        #expect(result.stdoutText.contains("python on stdio"), "\(result)")
        #expect(result.elapsed < TimeBounds.scaled(.milliseconds(1800)), "the CLI exited after \(result.elapsed)")
        expectNoSurvivors(result)
    }
}
