import AccessoryTestSupport
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
        // Daemonized, with every standard descriptor on /dev/null, through system(3): the
        // harness's Process-based `run` did not see a daemonizing command's shell exit.
        let startedBus = !FileManager.default.fileExists(atPath: "/run/dbus/system_bus_socket")
        if startedBus {
            guard which("dbus-daemon") != nil || FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon")
            else {
                throw AvahiFailure("dbus-daemon is not installed (package dbus); run scripts/bootstrap")
            }
            // A pid file left by a bus that is gone would stop this one from starting.
            let bus = await shell(
                "mkdir -p /run/dbus && rm -f /run/dbus/pid && dbus-daemon --system --fork </dev/null >/dev/null 2>&1"
            )
            guard bus == 0 else { throw AvahiFailure("could not start a system D-Bus: system(3) returned \(bus)") }
        }
        let stop: @Sendable () async -> Void = {
            _ = try? await run(daemon, ["--kill"], scratch: scratch)
            if startedBus {
                _ = await shell("kill $(cat /run/dbus/pid) && rm -f /run/dbus/system_bus_socket /run/dbus/pid")
            }
        }
        let avahi = await shell("\(daemon.path) --daemonize --no-drop-root --no-chroot </dev/null >/dev/null 2>&1")
        let deadline = ContinuousClock.now + .seconds(10)
        while try await run(daemon, ["--check"], scratch: scratch).status != 0 {
            guard ContinuousClock.now < deadline else {
                await stop()
                throw AvahiFailure("avahi-daemon did not come up within 10 s (system(3) returned \(avahi))")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        return stop
    }
}

/// `system(3)` on a thread of its own: its wait blocks.
private func shell(_ command: String) async -> CInt {
    await offPool { system(command) }
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
