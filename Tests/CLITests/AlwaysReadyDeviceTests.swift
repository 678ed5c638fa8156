import AccessoryTestSupport
import Foundation
import Testing

/// Character devices that are always ready (`/dev/zero`, `/dev/null`) cannot be watched by
/// epoll, and NIO traps when asked to (before 2026-12-06 each of these runs crashed with
/// "Fatal error: 'try!' expression unexpectedly raised an error: epoll_ctl … Operation not
/// permitted"). As the stdio link they get a clear error; as an upload's body they are read.
@Suite("always-ready devices")
struct AlwaysReadyDeviceTests {
    let scratch: Scratch

    init() throws {
        self.scratch = try Scratch()
    }

    func shell(_ command: String) async throws -> RunResult {
        let binary = try CLIBinary.url().path
        return try await run(
            URL(fileURLWithPath: "/bin/sh"),
            ["-c", command.replacingOccurrences(of: "CLI", with: "'\(binary)'")],
            scratch: self.scratch
        )
    }

    @Test(arguments: ["--device stdio get /status -o /dev/null", "serve --device stdio"], ["/dev/zero", "/dev/null"])
    func anAlwaysReadyStdinIsAClearError(command: String, device: String) async throws {
        let result = try await self.shell("exec CLI \(command) < \(device)")
        #expect(!result.signaled, "\(result)")
        #expect(result.status != 0 && result.status < 128, "\(result)")
        #expect(
            result.stderr.contains("always ready") || result.stderr.contains("/dev/null"),
            "\(result)"
        )
        #expect(result.stderr.contains("pipe, socket or terminal"), "\(result)")
    }

    /// `-d @/dev/zero` sends zeros until the timeout: exit 75, no crash.
    @Test func anUploadFromDevZeroRunsToItsTimeout() async throws {
        let result = try await self.shell("exec CLI --device emulator post /upload -d @/dev/zero --timeout 1")
        #expect(!result.signaled, "\(result)")
        #expect(result.status == 75, "\(result)")
    }
}
