import Foundation
import Testing

/// Tests/Fixtures/make-forged-cert.py (shared with the TLS tests): writes forged.pem/.key,
/// a certificate whose names try to forge terminal output.
let forgedCertificateScript = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures/make-forged-cert.py").path

#if canImport(Glibc)
    import Glibc
#endif

/// `accessory-http trust` against our own `serve --cert` (issue 12, findings 3 and 5).
@Suite("trust")
struct TrustCommandTests {
    let scratch: Scratch

    init() throws { self.scratch = try Scratch() }

    /// Two self-signed certificates for `meter` (different keys) and one whose names try to
    /// forge the lines `trust` prints (a newline, a fake pin line, ESC[8m).
    func makeCertificates() async throws {
        let script = """
            set -e
            for name in first second; do
              openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $name.key 2>/dev/null
              openssl req -x509 -new -key $name.key -out $name.pem -days 30 -subj "/CN=meter $name" -addext subjectAltName=DNS:meter 2>/dev/null
            done
            python3 "\(forgedCertificateScript)" FAKEFAKEFAKE
            """
        let result = try await run(URL(fileURLWithPath: "/bin/sh"), ["-c", script], scratch: self.scratch)
        try #require(result.status == 0, "making the test certificates failed: \(result)")
    }

    /// Serves the emulator over TLS with `name`.pem on a fresh unix socket.
    func serve(_ name: String) async throws -> (server: Child, device: String) {
        let socket = self.scratch.file("\(name).sock")
        let server = try startCLI(
            [
                "serve", "--device", "unix:" + socket, "--cert", self.scratch.file("\(name).pem"), "--key",
                self.scratch.file("\(name).key"),
            ],
            scratch: self.scratch
        )
        let listening = await eventually { FileManager.default.fileExists(atPath: socket) || !server.isRunning }
        guard listening, server.isRunning else {
            let result = await server.finish(timeout: 2)
            throw ServeFailed(description: "the TLS server did not start: \(result)")
        }
        return (server, "unix:" + socket)
    }

    struct ServeFailed: Error, CustomStringConvertible { let description: String }

    func stop(_ server: Child) async {
        server.signal(SIGTERM)
        _ = await server.finish(timeout: 5)
    }

    var knownAccessories: String {
        let file = self.scratch.configHome.path + "/accessory-http/trust/known_accessories"
        return (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
    }

    @Test func aChangedKeyIsNeverReplacedEvenWithYes() async throws {
        try await self.makeCertificates()
        let (first, firstDevice) = try await self.serve("first")
        let paired = try await runCLI(
            ["trust", "--device", firstDevice, "--tls-identity", "meter", "--yes"],
            scratch: scratch
        )
        await self.stop(first)
        #expect(paired.status == 0, "\(paired)")
        let remembered = self.knownAccessories
        #expect(remembered.contains("meter sha256:"), "\(remembered)")

        let (second, secondDevice) = try await self.serve("second")
        defer { second.signal(SIGKILL) }
        let refused = try await runCLI(
            ["trust", "--device", secondDevice, "--tls-identity", "meter", "--yes"],
            scratch: scratch
        )
        #expect(refused.status != 0, "\(refused)")
        #expect(refused.stderr.contains("DIFFERENT key"), "\(refused)")
        #expect(refused.stderr.contains("accessory-http trust --forget meter"), "\(refused)")
        #expect(self.knownAccessories == remembered, "the store must be left as it was")

        // The documented way: forget, then pair again; then requests use the new key.
        let forgot = try await runCLI(["trust", "--forget", "meter"], scratch: scratch)
        #expect(forgot.status == 0, "\(forgot)")
        let repaired = try await runCLI(
            ["trust", "--device", secondDevice, "--tls-identity", "meter", "--yes"],
            scratch: scratch
        )
        #expect(repaired.status == 0, "\(repaired)")
        #expect(self.knownAccessories != remembered)
        let request = try await runCLI(
            ["--device", secondDevice, "--tls-identity", "meter", "get", "/status"],
            scratch: scratch
        )
        #expect(request.status == 0, "\(request)")
        await self.stop(second)
    }

    @Test func aCertificateWithoutTheExpectedNameIsNotPairedWithYes() async throws {
        try await self.makeCertificates()
        let (server, device) = try await self.serve("first")
        defer { server.signal(SIGKILL) }
        let result = try await runCLI(
            ["trust", "--device", device, "--tls-name", "toaster", "--yes"],
            scratch: scratch
        )
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains("does not name 'toaster'"), "\(result)")
        #expect(result.stderr.contains("does not carry the expected name"), "\(result)")
        #expect(!self.knownAccessories.contains("toaster"))
        let named = try await runCLI(["trust", "--device", device, "--tls-name", "meter", "--yes"], scratch: scratch)
        #expect(named.status == 0, "\(named)")
        await self.stop(server)
    }

    @Test func namesThatForgeThePromptAreEscaped() async throws {
        try await self.makeCertificates()
        let (server, device) = try await self.serve("forged")
        defer { server.signal(SIGKILL) }
        let result = try await runCLI(
            ["trust", "--device", device, "--tls-identity", "forged", "--yes"],
            scratch: scratch
        )
        #expect(result.status == 0, "\(result)")
        #expect(!result.stderr.contains("\u{1B}"), "an escape sequence reached the terminal: \(result)")
        let pinLines = result.stderr.split(separator: "\n").filter {
            $0.trimmingCharacters(in: .whitespaces).hasPrefix("key pin:")
        }
        #expect(pinLines.count == 1, "a certificate forged a pin line: \(pinLines)")
        #expect(!result.stderr.contains("sha256:FAKEFAKEFAKE\n"))
        #expect(result.stderr.contains("\\x0A  key pin:     sha256:FAKEFAKEFAKE\\x1B[8m"), "\(result)")
        await self.stop(server)
    }
}
