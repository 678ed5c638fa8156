import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The machine's Avahi daemon, for the DNS-SD tests: the one that runs, or one these tests
/// start (with a system D-Bus when there is none, as on a fresh CI machine or in a container)
/// and stop again.
enum AvahiDaemon {
    /// Makes sure avahi-daemon answers; returns what stops the daemons started here.
    static func ensureRunning(scratch: Scratch) async throws -> @Sendable () async -> Void {
        let daemon = try #require(
            which("avahi-daemon") ?? URL(fileURLWithPath: "/usr/sbin/avahi-daemon").existingExecutable,
            "avahi-daemon is not installed (package avahi-daemon); run scripts/bootstrap"
        )
        if try await run(daemon, ["--check"], scratch: scratch).status == 0 { return {} }
        guard geteuid() == 0 else {
            throw AvahiFailure(
                "avahi-daemon is not running and starting it needs root; start it (avahi-daemon -D) first"
            )
        }
        // Daemonized through Python's subprocess (close_fds), never through a shell: a daemon
        // keeps whatever descriptors it inherits, and this process has many that are not
        // close-on-exec — other tests' pipes to their children (a child that never sees its
        // pipe's end never exits), and Foundation's exit-watch socket of every Process (whose
        // end tells Process that its child exited: `sh -c 'dbus-daemon --fork'` never did).
        let startedBus = !FileManager.default.fileExists(atPath: "/run/dbus/system_bus_socket")
        if startedBus {
            guard which("dbus-daemon") != nil || FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon")
            else {
                throw AvahiFailure("dbus-daemon is not installed (package dbus); run scripts/bootstrap")
            }
            // A pid file left by a bus that is gone would stop this one from starting.
            try FileManager.default.createDirectory(atPath: "/run/dbus", withIntermediateDirectories: true)
            try? FileManager.default.removeItem(atPath: "/run/dbus/pid")
            let bus = try await daemonize(["dbus-daemon", "--system", "--fork"], scratch: scratch)
            guard bus.status == 0 else {
                // A bus that half started leaves its socket, and the next run would take it
                // for a running bus (seen: a start that timed out in a loaded run).
                Self.stopBus()
                throw AvahiFailure("could not start a system D-Bus: \(bus)")
            }
        }
        let stop: @Sendable () async -> Void = {
            _ = try? await run(daemon, ["--kill"], scratch: scratch)
            if startedBus { Self.stopBus() }
        }
        let avahi = try await daemonize(
            [daemon.path, "--daemonize", "--no-drop-root", "--no-chroot"],
            scratch: scratch
        )
        let deadline = ContinuousClock.now + .seconds(10)
        while try await run(daemon, ["--check"], scratch: scratch).status != 0 {
            guard ContinuousClock.now < deadline else {
                await stop()
                throw AvahiFailure("avahi-daemon did not come up within 10 s: \(avahi)")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        return stop
    }

    /// Ends the system D-Bus these tests started, and removes its socket and pid file.
    private static func stopBus() {
        if let text = try? String(contentsOfFile: "/run/dbus/pid", encoding: .utf8),
            let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
        {
            _ = kill(pid, SIGKILL)  // dbus-daemon here does not end on SIGTERM
        }
        try? FileManager.default.removeItem(atPath: "/run/dbus/system_bus_socket")
        try? FileManager.default.removeItem(atPath: "/run/dbus/pid")
    }
}

/// Runs `arguments` (a daemon that forks into the background) with no descriptor but
/// /dev/null on 0, 1 and 2, and waits for the foreground process to exit.
private func daemonize(_ arguments: [String], scratch: Scratch) async throws -> RunResult {
    let python = try #require(which("python3"), "python3 is not installed")
    let script =
        "import subprocess, sys; d = subprocess.DEVNULL; "
        + "sys.exit(subprocess.run(sys.argv[1:], stdin=d, stdout=d, stderr=d, close_fds=True).returncode)"
    return try await run(python, ["-c", script] + arguments, scratch: scratch)
}

extension URL {
    fileprivate var existingExecutable: URL? {
        FileManager.default.isExecutableFile(atPath: self.path) ? self : nil
    }
}

/// Avahi could not be made to run for the DNS-SD tests.
struct AvahiFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
