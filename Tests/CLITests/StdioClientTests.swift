import AccessoryTestSupport
import Foundation
import Testing

/// `--device stdio` on the host side: the CLI speaks HTTP on its own stdin and stdout (under
/// socat, say), so the response cannot be printed there. Before 2026-12-07 it was: the body
/// went down the link, into the device, as a next request.
@Suite struct StdioClientTests {
    let scratch: Scratch

    init() throws {
        self.scratch = try Scratch()
    }

    @Test(arguments: [
        ["get", "/status"], ["get", "-i", "/status", "-o", "out.json"], ["head", "/status"],
        ["post", "-d", "@-", "/echo", "-o", "out.json"],
    ])
    func printingTheResponseIsRefused(command: [String]) async throws {
        let result = try await runCLI(["--device", "stdio"] + command, scratch: scratch, timeout: 20)
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains("--device stdio carries the link on this process's stdin"), "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
    }

    /// With -o, the exchange runs over the CLI's stdio, here joined by socat to `serve`'s.
    @Test func aBodyWrittenToAFileIsFetched() async throws {
        guard let socat = which("socat") else {
            Issue.record("socat is not installed")
            return
        }
        let binary = try CLIBinary.url().path
        let output = scratch.file("status.json")
        // Two CLI processes: one of the few timed runs at a time, as runCLI's.
        let result = try await Gate.cli.admitting {
            try await run(
                socat,
                [
                    "EXEC:\(binary) --device stdio get /status -o \(output)",
                    "EXEC:\(binary) serve --device stdio",
                ],
                scratch: scratch,
                timeout: 20
            )
        }
        #expect(result.status == 0, "\(result)")
        let body = try #require(readFile(output), "no \(output): \(result)")
        let json = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any]
        #expect(json?["model"] is String, "\(String(decoding: body, as: UTF8.self))")
    }
}
