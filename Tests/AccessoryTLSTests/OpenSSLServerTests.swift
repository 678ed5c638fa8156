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

    init() async throws { self.certificates = try await Certificates.get() }

    /// A client trust with nothing implicit: no system roots, no user trust store.
    func trust(anchors: [String] = [], pins: [TLSPin] = []) -> TLSTrust {
        TLSTrust(useSystemRoots: false, anchorFiles: anchors.map(self.certificates.path), trustStore: nil, pins: pins)
    }

    func get(_ server: OpenSSLServer, _ configuration: TLSConfiguration) async throws -> (Int, String) {
        try await fetch(server, configuration)
    }

    /// The TLSError under an AccessoryClientError.
    func tlsError(_ error: any Error) -> TLSError? { TLSErrors.find(in: error) }

    /// One peer set-up and what the client must make of it.
    struct Case: Sendable, CustomTestStringConvertible {
        enum Expected: Sendable {
            /// 200, and the page (s_server's status page) holds this text.
            case succeeds(pageContains: String? = nil)
            /// Fails with this TLS error code (`nil`: any error), its message holding `words`.
            case fails(TLSError.Code?, words: [String] = [])
        }

        let name: String
        let server: [String]
        let client: @Sendable (OpenSSLServerTests) throws -> TLSConfiguration
        let expected: Expected
        var testDescription: String { self.name }

        static let serverCertificate = ["-cert", "server.pem", "-key", "server.key"]
        static let requiresClientCertificate =
            serverCertificate + ["-Verify", "1", "-verify_return_error", "-CAfile", "clientca.pem"]
        static let byCA: @Sendable (OpenSSLServerTests) -> TLSConfiguration = {
            .client(serverName: "accessory.local", trust: $0.trust(anchors: ["ca.pem"]))
        }

        static let all: [Case] = [
            Case(
                name: "a valid chain",
                server: serverCertificate,
                client: byCA,
                expected: .succeeds(pageContains: "s_server")
            ),
            Case(
                name: "a self-signed certificate, pinned",
                server: ["-cert", "self.pem", "-key", "self.key"],
                client: { test in
                    // The pin as openssl computes it: base64 of SHA-256 over the DER SubjectPublicKeyInfo.
                    let spki = try String(contentsOfFile: test.certificates.path("self.spki"), encoding: .utf8)
                    let pin = try TLSPin(parsing: "sha256:" + spki.trimmingCharacters(in: .whitespacesAndNewlines))
                    return .client(trust: test.trust(pins: [pin]))
                },
                expected: .succeeds()
            ),
            Case(
                name: "a self-signed certificate, not trusted",
                server: ["-cert", "self.pem", "-key", "self.key"],
                client: byCA,
                expected: .fails(.untrustedCertificate, words: ["self-signed", "--pin sha256:"])
            ),
            Case(
                name: "the wrong name",
                server: serverCertificate,
                client: {
                    .client(serverName: "toaster.local", trust: $0.trust(anchors: ["ca.pem"]))
                },
                expected: .fails(.nameMismatch, words: ["DNS:accessory.local", "toaster.local"])
            ),
            Case(
                name: "no name and no pin",
                server: serverCertificate,
                client: { .client(trust: $0.trust(anchors: ["ca.pem"])) },
                expected: .fails(.noIdentity)
            ),
            Case(
                name: "an expired certificate",
                server: ["-cert", "expired.pem", "-key", "server.key"],
                client: byCA,
                expected: .fails(.untrustedCertificate, words: ["expired"])
            ),
            Case(
                name: "a client certificate required, given as PEM",
                server: requiresClientCertificate,
                client: { test in
                    .client(
                        serverName: "accessory.local",
                        trust: test.trust(anchors: ["ca.pem"]),
                        identity: .pem(
                            certificateFile: test.certificates.path("client.pem"),
                            keyFile: test.certificates.path("client.key")
                        )
                    )
                },
                expected: .succeeds(pageContains: "test-client")
            ),
            Case(
                name: "a client certificate required, given as PKCS#12",
                server: requiresClientCertificate,
                client: { test in
                    .client(
                        serverName: "accessory.local",
                        trust: test.trust(anchors: ["ca.pem"]),
                        identity: .pkcs12(file: test.certificates.path("client.p12"), password: "p12secret")
                    )
                },
                expected: .succeeds(pageContains: "test-client")
            ),
            Case(
                name: "a client certificate required, none given",
                server: requiresClientCertificate,
                client: byCA,
                expected: .fails(nil, words: ["requires a client certificate"])
            ),
            Case(
                name: "a wrong PKCS#12 password",
                server: serverCertificate,
                client: { test in
                    .client(
                        serverName: "accessory.local",
                        trust: test.trust(anchors: ["ca.pem"]),
                        identity: .pkcs12(file: test.certificates.path("client.p12"), password: "wrong")
                    )
                },
                expected: .fails(.invalidConfiguration, words: ["wrong password"])
            ),
            Case(
                name: "a TLS 1.1-only server",
                server: serverCertificate + ["-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"],
                client: byCA,
                expected: .fails(.handshakeFailed, words: ["share no TLS version"])
            ),
            Case(
                name: "a TLS 1.0-only server",
                server: serverCertificate + ["-tls1", "-cipher", "DEFAULT@SECLEVEL=0"],
                client: byCA,
                expected: .fails(.handshakeFailed, words: ["share no TLS version"])
            ),
            Case(
                name: "a TLS 1.2-only server",
                server: serverCertificate + ["-tls1_2"],
                client: byCA,
                expected: .succeeds()
            ),
        ]
    }

    @Test(arguments: Case.all)
    func peer(_ test: Case) async throws {
        let server = try await OpenSSLServer.start(test.server, certificates: self.certificates)
        defer { server.stop() }
        let configuration = try test.client(self)
        switch test.expected {
        case .succeeds(let pageContains):
            let (status, page) = try await self.get(server, configuration)
            #expect(status == 200)
            if let pageContains { #expect(page.contains(pageContains), "\(page.prefix(200))") }
        case .fails(let code, let words):
            do {
                _ = try await self.get(server, configuration)
                Issue.record("expected the exchange to fail")
            } catch {
                let tls = self.tlsError(error)
                if let code { #expect(tls?.code == code, "\(error)") }
                let message = code == nil ? "\(error)" : tls?.message ?? ""
                for word in words { #expect(message.contains(word), "\(message)") }
            }
        }
    }
}
