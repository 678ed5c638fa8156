import AccessoryClient
import AccessoryHTTP1
import AccessoryTransport
import Foundation
import Testing

/// A connection the HTTP/2 link let go of (replaced by a reopen after the device closed it) is
/// still waited for by the link's shutdown: the CLI shuts down and exits right after, and what
/// an `exec:` device left running (a process of its group that ignores SIGTERM) outlived it.
/// Before 2026-12-06 only the connection open at the shutdown was waited for.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct HTTP2ReleaseTests {
    /// The processes of group `group` that still run. Zombies do not count: a killed
    /// grandchild is reaped by whoever adopted it, which under `scripts/reap-check` (a child
    /// subreaper) is not this process and not at once.
    static func livingMembers(ofGroup group: pid_t) -> [pid_t] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        return entries.compactMap { entry -> pid_t? in
            guard let pid = pid_t(entry),
                let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let end = stat.lastIndex(of: ")")
            else { return nil }
            // After the command's closing parenthesis: state, ppid, pgrp, …
            let fields = stat[stat.index(after: end)...].split(separator: " ")
            guard fields.count > 2, pid_t(fields[2]) == group, fields[0] != "Z", fields[0] != "X" else { return nil }
            return pid
        }
    }

    @Test func aShutdownWaitsForAConnectionReplacedBefore() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("h2-release-\(UInt64.random(in: 0...UInt64.max))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for attempt in 0..<4 {
            let pidFile = "\(directory)/devices-\(attempt).pid"
            // Each open: a device that closes its output at once and, like its `sleep`, ignores
            // SIGTERM; only the SIGKILL to its process group ends all of it.
            let command = "echo $$ >> '\(pidFile)'; trap '' TERM; exec >&-; sleep 30"
            var configuration = AccessoryClient.Configuration()
            configuration.link.httpVersion = .http2
            let client = AccessoryClient(
                transport: ChildProcessTransport(command: command),
                configuration: configuration
            )
            // Two requests that fail: each one after the first opens again and lets the
            // previous connection go.
            for request in 0..<2 {
                await #expect(throws: (any Error).self, "try \(attempt), request \(request)") {
                    _ = try await client.get("/status")
                }
            }
            let pids = try String(contentsOfFile: pidFile, encoding: .utf8).split(separator: "\n").compactMap {
                pid_t($0)
            }
            #expect(pids.count >= 2, "try \(attempt): \(pids)")
            await client.shutdown()
            for pid in pids {
                let living = Self.livingMembers(ofGroup: pid)
                #expect(living.isEmpty, "try \(attempt): shutdown returned while device group \(pid) ran: \(living)")
                if !living.isEmpty { kill(-pid, SIGKILL) }
            }
        }
    }
}
