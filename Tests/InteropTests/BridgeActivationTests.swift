import AccessoryTestSupport
import Foundation
import Glibc
import Testing

/// The bridge started by socket activation (issue 11): `systemd-socket-activate` (package
/// systemd) listens, passes the socket on the first connection (LISTEN_FDS), and the bridge
/// serves it; SIGTERM ends it with status 0.
@Suite("bridge socket activation")
struct BridgeActivationTests {
    /// `accessory-http` from this build: next to the test bundle, else in .build.
    static func cliBinary() -> String? {
        var candidates: [String] = []
        if let bundle = Bundle.allBundles.first(where: { $0.bundlePath.hasSuffix(".xctest") }) {
            candidates.append(
                URL(fileURLWithPath: bundle.bundlePath).deletingLastPathComponent().appendingPathComponent(
                    "accessory-http"
                ).path
            )
        }
        candidates.append(
            URL(fileURLWithPath: CommandLine.arguments.first ?? "").deletingLastPathComponent().appendingPathComponent(
                "accessory-http"
            ).path
        )
        return candidates.first { access($0, X_OK) == 0 }
    }

    @Test func socketActivation() async throws {
        let activate = "/usr/bin/systemd-socket-activate"
        try #require(
            access(activate, X_OK) == 0,
            "systemd-socket-activate is missing (package systemd); run scripts/bootstrap"
        )
        let binary = try #require(Self.cliBinary(), "accessory-http was not built next to the tests")
        let directory = try TemporaryDirectory("activation")
        defer { directory.remove() }
        let socket = directory.path("activated.sock")
        // systemd-socket-activate gives its child a clean environment: pass the sanitizer
        // options on, as scripts/test means them to reach every process.
        let sanitizerOptions = ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"].compactMap { name in
            ProcessInfo.processInfo.environment[name].map { ["-E", "\(name)=\($0)"] }
        }.flatMap { $0 }
        let server = try Subprocess(
            [activate, "-l", socket] + sanitizerOptions + ["--", binary, "bridge", "--device", "emulator"],
            logPath: directory.path("server.log")
        )
        defer { server.stop() }
        let listening = await waitUntil(timeout: .seconds(10)) { unixSocketAccepts(socket) || !server.isRunning }
        try #require(listening && server.isRunning, "systemd-socket-activate did not listen: \(server.log)")
        let (status, answer) = try await run(
            ["/usr/bin/curl", "-sS", "--max-time", "20", "--unix-socket", socket, "http://accessory/status"],
            in: directory
        )
        #expect(status == 0 && answer.contains("EMU0001"), "\(answer)")
        let (_, document) = try await run(
            [
                "/usr/bin/curl", "-sS", "--max-time", "20", "--unix-socket", socket,
                "http://accessory/.well-known/accessory-http/status",
            ],
            in: directory
        )
        #expect(document.contains("\"requests\":1"), "\(document)")
        kill(server.pid, SIGTERM)
        let exit = await server.wait(timeout: .seconds(10))
        #expect(
            exit == 0,
            "the bridge did not end with 0 on SIGTERM (wait status \(String(describing: exit))): \(server.log)"
        )
        #expect(server.log.contains("serving emulator on systemd socket (fd 3)"), "\(server.log)")
    }
}
