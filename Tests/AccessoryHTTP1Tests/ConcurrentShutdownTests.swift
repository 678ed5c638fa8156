import AccessoryHTTP1
import AccessoryTransport
import Foundation
import Testing

/// `shutdown` returns once the transport has let go, for every caller: the CLI shuts its link
/// down after SIGINT from two places at once (the cancellation handler, and the run itself),
/// and the second call returned at once, before an `exec:` device's process group was gone
/// (CI saw the grandchild outlive the CLI).
@Suite(.serialized)
struct ConcurrentShutdownTests {
    static let stdioDevice = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/stdio-device.py").path

    /// The pids of processes whose command line holds `marker`.
    static func survivors(_ marker: String) -> [String] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.filter { $0.allSatisfy(\.isNumber) }.filter { pid in
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
            return String(decoding: data, as: UTF8.self).contains(marker)
        }
    }

    /// 16 tries: a device behind a shell that ignores SIGTERM (only the group's SIGKILL ends it),
    /// one answered request, then two shutdowns at once; when either returns, nothing of the
    /// device's group is left.
    @Test func everyConcurrentShutdownWaitsForTheTransport() async throws {
        for attempt in 0..<16 {
            let marker = "accessory-http-shutdown-test-\(UInt64.random(in: 0...UInt64.max))"
            let command = "trap '' TERM; python3 \(Self.stdioDevice) \(marker); true"
            let link = HTTPLink(transport: ChildProcessTransport(command: command), configuration: testConfiguration())
            #expect(try await link.fetch("/status").status == 200, "try \(attempt)")
            #expect(!Self.survivors(marker).isEmpty, "try \(attempt): the device never started")
            await withTaskGroup(of: [String].self) { group in
                for _ in 0..<2 {
                    group.addTask {
                        await link.shutdown()
                        return Self.survivors(marker)
                    }
                }
                for await left in group {
                    #expect(left.isEmpty, "try \(attempt): a shutdown returned while \(left) still ran")
                }
            }
            for pid in Self.survivors(marker) { kill(pid_t(pid) ?? 0, SIGKILL) }
        }
    }
}
