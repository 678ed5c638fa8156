import AccessoryCrypto
import AccessoryEmulator
import AccessoryResponder
import Foundation
import NIOPosix
import Testing

/// curl, an independent HTTP/1.1 client, talking to the emulator over a unix socket.
@Suite(
    .timeLimit(.minutes(2)),
    .enabled(if: Curl.isAvailable, "curl is not installed at /usr/bin/curl; install it to run these tests")
)
struct CurlInteropTests {
    /// Serves the emulator on a fresh unix socket while `body` runs.
    func withUnixSocket(_ body: (String) async throws -> Void) async throws {
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("accessory-\(UInt32.random(in: 0...UInt32.max)).sock").path
        let responder = EmulatedAccessory().makeResponder()
        let server = Task {
            try await responder.serveUnixSocket(path: path, group: MultiThreadedEventLoopGroup.singleton)
        }
        // Wait (bounded) for the socket file to appear.
        var ready = false
        for _ in 0..<200 where !ready {
            ready = FileManager.default.fileExists(atPath: path)
            if !ready { try await Task.sleep(for: .milliseconds(10)) }
        }
        try #require(ready, "the responder did not create \(path)")
        do {
            try await body(path)
        } catch {
            server.cancel()
            throw error
        }
        server.cancel()
        #expect(await LinkFixture.finishes(server, within: .seconds(10)), "serveUnixSocket did not stop when cancelled")
        #expect(!FileManager.default.fileExists(atPath: path), "the socket file was left behind")
    }

    @Test func curlGetsStatus() async throws {
        try await self.withUnixSocket { path in
            let result = try await Curl.run(["-sS", "--fail", "--unix-socket", path, "http://accessory/status"])
            #expect(result.status == 0, "\(result.stderr)")
            let json = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            #expect(json?["model"] as? String == "AH-EMU-1")
        }
    }

    @Test func curlHeadShowsHeadersOnly() async throws {
        try await self.withUnixSocket { path in
            let result = try await Curl.run(["-sS", "-I", "--unix-socket", path, "http://accessory/bytes/1234"])
            #expect(result.status == 0, "\(result.stderr)")
            let lines = result.stdout.components(separatedBy: "\r\n")
            #expect(lines.first == "HTTP/1.1 200 OK")
            #expect(lines.contains { $0.lowercased() == "content-length: 1234" })
        }
    }

    @Test(arguments: ["auth/alice/s3cret", "auth/alice/s3cret/MD5", "none/alice/s3cret"])
    func curlDigestAuthenticates(route: String) async throws {
        try await self.withUnixSocket { path in
            let result = try await Curl.run([
                "-sS", "--fail", "--digest", "-u", "alice:s3cret", "--unix-socket", path,
                "http://accessory/digest-auth/\(route)",
            ])
            #expect(result.status == 0, "\(result.stderr)")
            let json = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            #expect(json?["authenticated"] as? Bool == true)
        }
    }

    @Test func curlDigestSHA256Authenticates() async throws {
        try await self.withUnixSocket { path in
            let result = try await Curl.run([
                "-sS", "--fail", "--digest", "-u", "alice:s3cret", "--unix-socket", path,
                "http://accessory/digest-auth/auth/alice/s3cret/SHA-256",
            ])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.contains("\"authenticated\":true"))
        }
    }

    @Test func curlUploadIsHashedCorrectly() async throws {
        try await self.withUnixSocket { path in
            // Over 1 MiB, so curl sends Expect: 100-continue.
            let bytes = EmulatedAccessory.patternBytes(offset: 12_345, count: 3 * 1024 * 1024 + 7)
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("upload-\(UUID().uuidString)")
            try Data(bytes).write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }
            let result = try await Curl.run([
                "-sS", "--fail", "--unix-socket", path, "--data-binary", "@\(file.path)",
                "-H", "Content-Type: application/octet-stream", "http://accessory/upload",
            ])
            #expect(result.status == 0, "\(result.stderr)")
            let json = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            #expect(json?["length"] as? Int == bytes.count)
            #expect(json?["sha256"] as? String == Digest.hex(.sha256, of: bytes))
        }
    }

    @Test func curlFollowsRedirectsAndReusesTheConnection() async throws {
        try await self.withUnixSocket { path in
            let result = try await Curl.run([
                "-sS", "--fail", "-L", "-w", "%{num_connects} %{num_redirects}", "-o", "/dev/null",
                "--unix-socket", path, "http://accessory/redirect/3",
            ])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout == "1 3")
        }
    }
}
