import AccessoryClient
import AccessoryCrypto
import AccessoryEmulator
import AccessoryHTTP1
import AccessoryResponder
import AccessoryTestSupport
import Foundation
import Glibc
import NIOCore
import NIOPosix
import Testing

/// HTTP/2 with prior knowledge against independent implementations: our client against nginx
/// (`listen unix:… http2`), directly and through a socat pty; curl and h2load against our
/// responder on a unix socket.
@Suite("HTTP/2 interoperability", .serialized)
struct HTTP2InteropTests {
    static func exercise(_ client: AccessoryClient, _ nginx: NginxFixture) async throws {
        let (status, body) = try await client.get("/status")
        #expect(status.status == .ok)
        #expect(body.text == #"{"model":"nginx","ok":true}"#)
        // 8 downloads of the 5 MiB file at once, each checked.
        let expected = Digest.hex(.sha256, of: try nginx.fileBytes("random.bin"))
        try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    let (head, bytes) = try await client.get("/random.bin", maxBodySize: 8 << 20)
                    #expect(head.status == .ok)
                    return Digest.hex(.sha256, of: bytes.readableBytesView)
                }
            }
            for try await digest in group { #expect(digest == expected) }
        }
        #expect(client.http2?.openCount == 1)
    }

    @Test func nginxOverAUnixSocket() async throws {
        try await NginxFixture.with(http2: true) { nginx in
            try await withClient("unix:\(nginx.socketPath)", configure: { $0.link.httpVersion = .http2 }) {
                try await Self.exercise($0, nginx)
            }
        }
    }

    @Test func nginxThroughASocatPty() async throws {
        try #require(access(NginxInteropTests.socat, X_OK) == 0, "socat is not installed")
        try await NginxFixture.with(http2: true) { nginx in
            let tty = nginx.directory.path("tty")
            let bridge = try Subprocess(
                [NginxInteropTests.socat, "PTY,link=\(tty),raw,echo=0", "UNIX-CONNECT:\(nginx.socketPath)"],
                logPath: nginx.directory.path("socat.log")
            )
            defer { bridge.stop() }
            var info = stat()
            let ready = await waitUntil(timeout: .seconds(10)) { !bridge.isRunning || stat(tty, &info) == 0 }
            try #require(ready && bridge.isRunning, "socat did not create \(tty): \(bridge.log)")
            // 40 MiB through socat's pty: 9 s alone under AddressSanitizer here, 25-44 s beside the
            // rest of the target, over 60 s once on the CI machine. Each download's deadline is only
            // a guard against a hang (the 15 s idle bound catches a stall), so it is wider there.
            try await withClient(
                "serial:\(tty)",
                configure: {
                    $0.link.httpVersion = .http2
                    if TimeBounds.sanitized { $0.defaultTimeout = .seconds(240) }
                }
            ) {
                try await Self.exercise($0, nginx)
            }
        }
    }

    /// nginx sends GOAWAY after `keepalive_requests` streams on a connection: the link moves to a
    /// new connection and no request fails, one after another and eight at once.
    @Test func nginxGoAwayMovesTheLinkToANewConnection() async throws {
        try await NginxFixture.with(http2: true, requestsPerConnection: 4) { nginx in
            try await withClient("unix:\(nginx.socketPath)", configure: { $0.link.httpVersion = .http2 }) { client in
                for round in 0..<16 {
                    let (head, body) = try await client.get("/status")
                    #expect(head.status == .ok, "request \(round)")
                    #expect(body.text == #"{"model":"nginx","ok":true}"#, "request \(round)")
                }
                #expect((client.http2?.openCount ?? 0) >= 4, "16 requests, 4 per connection")
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<8 {
                        group.addTask {
                            let (head, _) = try await client.get("/status")
                            #expect(head.status == .ok)
                        }
                    }
                    try await group.waitForAll()
                }
            }
        }
    }

    @Test func curlAndH2loadAgainstTheResponder() async throws {
        let directory = try TemporaryDirectory("h2r")
        defer { directory.remove() }
        let path = directory.path("acc.sock")
        let responder = EmulatedAccessory().makeResponder()
        let server = Task { try await responder.serveUnixSocket(path: path) }
        defer { server.cancel() }
        let up = await waitUntil(timeout: .seconds(10)) { unixSocketAccepts(path) }
        try #require(up, "the responder did not listen on \(path)")

        let status = try await run(
            [
                "/usr/bin/curl", "-sS", "--http2-prior-knowledge", "--unix-socket", path, "-w", "\\n%{http_version}",
                "http://accessory/status",
            ],
            in: directory
        )
        #expect(status.status == 0 && status.output.hasSuffix("\n2") && status.output.contains("AH-EMU-1"), "\(status)")

        let download = directory.path("bytes.bin")
        let fetched = try await run(
            [
                "/usr/bin/curl", "-sS", "--http2-prior-knowledge", "--unix-socket", path, "-o", download,
                "http://accessory/bytes/3000000",
            ],
            in: directory
        )
        #expect(fetched.status == 0, "\(fetched)")
        let expected = (0..<3_000_000).map { EmulatedAccessory.patternByte(at: $0) }
        #expect(try readFile(download) == expected)

        guard access("/usr/bin/h2load", X_OK) == 0 else {
            Issue.record("h2load is not installed (Debian nghttp2-client); run scripts/bootstrap")
            return
        }
        let load = try await run(
            ["/usr/bin/h2load", "-n", "2000", "-c", "1", "-m", "8", "-B", "unix:\(path)", "http://accessory/status"],
            in: directory
        )
        #expect(load.status == 0, "\(load)")
        #expect(load.output.contains("2000 succeeded, 0 failed, 0 errored"), "\(load.output)")
    }
}
