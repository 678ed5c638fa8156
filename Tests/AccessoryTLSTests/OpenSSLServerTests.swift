import AccessoryClient
import AccessoryHTTP1
import AccessoryTLS
import AccessoryTransport
import Foundation
import NIOCore
import NIOPosix
import Testing

/// `openssl s_server` plays the accessory: a TLS peer nobody here wrote.
@Suite(.timeLimit(.minutes(2)))
struct OpenSSLServerTests {
    let certificates: Certificates

    init() throws { self.certificates = try Certificates.get() }

    /// A client trust with nothing implicit: no system roots, no user trust store.
    func trust(anchors: [String] = [], pins: [TLSPin] = []) -> TLSTrust {
        TLSTrust(useSystemRoots: false, anchorFiles: anchors.map(self.certificates.path), trustStore: nil, pins: pins)
    }

    func get(_ server: OpenSSLServer, _ configuration: TLSConfiguration) async throws -> (Int, String) {
        try await fetch(server, configuration)
    }

    /// The TLSError under an AccessoryClientError.
    func tlsError(_ error: any Error) -> TLSError? { TLSErrors.find(in: error) }

    @Test func validChainSucceeds() async throws {
        let server = try await OpenSSLServer.start(
            ["-cert", "server.pem", "-key", "server.key"],
            certificates: self.certificates
        )
        defer { server.stop() }
        let (status, body) = try await self.get(
            server,
            .client(serverName: "accessory.local", trust: self.trust(anchors: ["ca.pem"]))
        )
        #expect(status == 200)
        #expect(body.contains("s_server"), "\(body.prefix(200))")
    }

    @Test func selfSignedAndPinnedSucceeds() async throws {
        let server = try await OpenSSLServer.start(
            ["-cert", "self.pem", "-key", "self.key"],
            certificates: self.certificates
        )
        defer { server.stop() }
        // The pin as openssl computes it: base64 of SHA-256 over the DER SubjectPublicKeyInfo.
        let spki = try String(contentsOfFile: self.certificates.path("self.spki"), encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines
        )
        let pin = try TLSPin(parsing: "sha256:" + spki)
        let (status, _) = try await self.get(server, .client(trust: self.trust(pins: [pin])))
        #expect(status == 200)
    }

    @Test func selfSignedNotTrustedFails() async throws {
        let server = try await OpenSSLServer.start(
            ["-cert", "self.pem", "-key", "self.key"],
            certificates: self.certificates
        )
        defer { server.stop() }
        await #expect {
            _ = try await self.get(
                server,
                .client(serverName: "accessory.local", trust: self.trust(anchors: ["ca.pem"]))
            )
        } throws: { error in
            let tls = self.tlsError(error)
            return tls?.code == .untrustedCertificate && tls?.message.contains("self-signed") == true
                && tls?.message.contains("--pin sha256:") == true
        }
    }

    @Test func wrongNameFails() async throws {
        let server = try await OpenSSLServer.start(
            ["-cert", "server.pem", "-key", "server.key"],
            certificates: self.certificates
        )
        defer { server.stop() }
        await #expect {
            _ = try await self.get(server, .client(serverName: "toaster.local", trust: self.trust(anchors: ["ca.pem"])))
        } throws: { error in
            let tls = self.tlsError(error)
            return tls?.code == .nameMismatch && tls?.message.contains("DNS:accessory.local") == true
                && tls?.message.contains("toaster.local") == true
        }
    }

    @Test func noNameAndNoPinIsRefusedExplicitly() async throws {
        let server = try await OpenSSLServer.start(
            ["-cert", "server.pem", "-key", "server.key"],
            certificates: self.certificates
        )
        defer { server.stop() }
        await #expect {
            _ = try await self.get(server, .client(trust: self.trust(anchors: ["ca.pem"])))
        } throws: { self.tlsError($0)?.code == .noIdentity }
    }

    @Test func expiredFails() async throws {
        let server = try await OpenSSLServer.start(
            ["-cert", "expired.pem", "-key", "server.key"],
            certificates: self.certificates
        )
        defer { server.stop() }
        await #expect {
            _ = try await self.get(
                server,
                .client(serverName: "accessory.local", trust: self.trust(anchors: ["ca.pem"]))
            )
        } throws: { error in
            let tls = self.tlsError(error)
            return tls?.code == .untrustedCertificate && tls?.message.contains("expired") == true
        }
    }

    @Test(arguments: ["pem", "p12"])
    func clientCertificateRequiredWithIdentitySucceeds(form: String) async throws {
        let server = try await OpenSSLServer.start(
            [
                "-cert", "server.pem", "-key", "server.key", "-Verify", "1", "-verify_return_error", "-CAfile",
                "clientca.pem",
            ],
            certificates: self.certificates
        )
        defer { server.stop() }
        let identity: TLSIdentity =
            form == "pem"
            ? .pem(certificateFile: self.certificates.path("client.pem"), keyFile: self.certificates.path("client.key"))
            : .pkcs12(file: self.certificates.path("client.p12"), password: "p12secret")
        let (status, body) = try await self.get(
            server,
            .client(serverName: "accessory.local", trust: self.trust(anchors: ["ca.pem"]), identity: identity)
        )
        #expect(status == 200)
        #expect(body.contains("test-client"), "s_server's page should show the client's certificate")
    }

    @Test func clientCertificateRequiredWithoutOneFails() async throws {
        let server = try await OpenSSLServer.start(
            [
                "-cert", "server.pem", "-key", "server.key", "-Verify", "1", "-verify_return_error", "-CAfile",
                "clientca.pem",
            ],
            certificates: self.certificates
        )
        defer { server.stop() }
        await #expect {
            _ = try await self.get(
                server,
                .client(serverName: "accessory.local", trust: self.trust(anchors: ["ca.pem"]))
            )
        } throws: { error in
            "\(error)".contains("requires a client certificate")
        }
    }

    @Test func wrongPKCS12PasswordIsAClearError() async throws {
        let server = try await OpenSSLServer.start(
            ["-cert", "server.pem", "-key", "server.key"],
            certificates: self.certificates
        )
        defer { server.stop() }
        await #expect {
            _ = try await self.get(
                server,
                .client(
                    serverName: "accessory.local",
                    trust: self.trust(anchors: ["ca.pem"]),
                    identity: .pkcs12(file: self.certificates.path("client.p12"), password: "wrong")
                )
            )
        } throws: { error in
            let tls = self.tlsError(error)
            return tls?.code == .invalidConfiguration && tls?.message.contains("wrong password") == true
        }
    }

    @Test(arguments: ["-tls1_1", "-tls1"])
    func oldProtocolOnlyServerIsRefused(version: String) async throws {
        let server = try await OpenSSLServer.start(
            ["-cert", "server.pem", "-key", "server.key", version, "-cipher", "DEFAULT@SECLEVEL=0"],
            certificates: self.certificates
        )
        defer { server.stop() }
        await #expect {
            _ = try await self.get(
                server,
                .client(serverName: "accessory.local", trust: self.trust(anchors: ["ca.pem"]))
            )
        } throws: { error in
            let tls = self.tlsError(error)
            return tls?.code == .handshakeFailed && tls?.message.contains("share no TLS version") == true
        }
    }

    @Test func tls12OnlyServerWorks() async throws {
        let server = try await OpenSSLServer.start(
            ["-cert", "server.pem", "-key", "server.key", "-tls1_2"],
            certificates: self.certificates
        )
        defer { server.stop() }
        let (status, _) = try await self.get(
            server,
            .client(serverName: "accessory.local", trust: self.trust(anchors: ["ca.pem"]))
        )
        #expect(status == 200)
    }
}
