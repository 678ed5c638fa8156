import AccessoryClient
import AccessoryEmulator
import AccessoryHTTP1
import AccessoryResponder
import AccessoryTLS
import AccessoryTransport
import Foundation
import NIOCore
import NIOPosix
import Testing

/// ALPN (RFC 7301) on both sides: the client offers what its link speaks (`h2` for http=2), the
/// server picks from what it speaks; curl and `openssl s_server` are the independent peers.
@Suite(.timeLimit(.minutes(2)))
struct ALPNTests {
    let certificates: Certificates

    init() async throws { self.certificates = try await Certificates.get() }

    var trust: TLSTrust {
        TLSTrust(useSystemRoots: false, anchorFiles: [self.certificates.path("ca.pem")], trustStore: nil)
    }

    func client(offering protocols: [String]) -> TLSConfiguration {
        var configuration = TLSConfiguration.client(serverName: "accessory.local", trust: self.trust)
        configuration.applicationProtocols = protocols
        return configuration
    }

    /// Our responder over TLS on a unix socket, speaking `h2` and `http/1.1` by ALPN.
    func withResponder(_ body: (String) async throws -> Void) async throws {
        try await withTLSResponder(self.certificates, applicationProtocols: ["h2", "http/1.1"], body)
    }

    /// What the handshake settled when the client offers `protocols` to our responder.
    func negotiated(_ path: String, offering protocols: [String]) async throws -> String? {
        let transport = TLSTransport(
            wrapping: UnixSocketTransport(path: path),
            configuration: self.client(offering: protocols)
        )
        let (opened, session) = try await transport.openSession(on: MultiThreadedEventLoopGroup.singleton.next()) {
            $0.eventLoop.makeSucceededVoidFuture()
        }
        try await opened.channel.close()
        return session.applicationProtocol
    }

    @Test func ourResponderPicksWhatTheClientOffers() async throws {
        try await self.withResponder { path in
            #expect(try await self.negotiated(path, offering: ["h2"]) == "h2")
            #expect(try await self.negotiated(path, offering: ["http/1.1"]) == "http/1.1")
            #expect(try await self.negotiated(path, offering: ["h2", "http/1.1"]) == "h2")
            #expect(try await self.negotiated(path, offering: []) == nil)
            // A protocol the responder does not speak: no ALPN, the handshake still completes.
            #expect(try await self.negotiated(path, offering: ["spdy/3"]) == nil)

            // Our HTTP/2 client over that TLS link.
            var configuration = AccessoryClient.Configuration()
            configuration.link.httpVersion = .http2
            let client = AccessoryClient(
                transport: TLSTransport(
                    wrapping: UnixSocketTransport(path: path),
                    configuration: self.client(offering: ["h2"])
                ),
                configuration: configuration
            )
            let (response, body) = try await client.data(AccessoryRequest(path: "/status"))
            await client.shutdown()
            #expect(response.status.code == 200 && String(buffer: body).contains("AH-EMU-1"))
        }
    }

    /// curl chooses HTTP/2 by ALPN alone (no prior knowledge) and gets it from our responder.
    @Test func curlNegotiatesHTTP2ByALPN() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/curl") else {
            Issue.record("curl is not installed")
            return
        }
        try await self.withResponder { path in
            let result = try await Subprocess.run(
                [
                    "curl", "-sS", "--http2", "--max-time", "10", "--unix-socket", path, "--cacert", "ca.pem",
                    "-w", "\nhttp_version=%{http_version}", "https://accessory.local/status",
                ],
                directory: self.certificates.directory
            )
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.contains("AH-EMU-1") && result.stdout.hasSuffix("http_version=2"), "\(result.stdout)")
        }
    }

    /// `openssl s_server -alpn http/1.1`: offered `h2` alone, the client is refused with a
    /// message that names ALPN; offered both, it gets HTTP/1.1.
    @Test func aServerWithoutH2() async throws {
        let server = try await OpenSSLServer.start(
            ["-cert", "server.pem", "-key", "server.key", "-alpn", "http/1.1"],
            certificates: self.certificates
        )
        defer { server.stop() }
        do {
            _ = try await fetch(server, self.client(offering: ["h2"]))
            Issue.record("a server without h2 accepted a client that offered only h2")
        } catch {
            let message = TLSErrors.find(in: error)?.message ?? "\(error)"
            #expect(message.contains("no application protocol"), "\(message)")
        }
        let (status, _) = try await fetch(server, self.client(offering: ["h2", "http/1.1"]))
        #expect(status == 200)
    }
}
