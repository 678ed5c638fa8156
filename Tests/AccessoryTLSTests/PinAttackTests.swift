import AccessoryClient
import AccessoryTLS
import AccessoryTransport
import Foundation
import Synchronization
import Testing

/// The attacks of the security review (issue 12), each played by `openssl s_server` as the
/// impostor: every one of them was accepted before the fix.
@Suite(.timeLimit(.minutes(2)))
struct PinAttackTests {
    let certificates: Certificates

    init() async throws { self.certificates = try await Certificates.get() }

    func certificate(_ file: String) throws -> TLSCertificate {
        try #require(try TLSCertificate.load(pemFile: self.certificates.path(file)).first)
    }

    func pin(_ file: String, _ kind: TLSPin.Kind) throws -> TLSPin {
        let certificate = try self.certificate(file)
        return kind == .spki ? certificate.spkiPin : certificate.certificatePin
    }

    func trust(anchors: [String] = [], pins: [TLSPin] = [], evaluator: TLSServerTrustEvaluator? = nil) -> TLSTrust {
        TLSTrust(
            useSystemRoots: false,
            anchorFiles: anchors.map(self.certificates.path),
            trustStore: nil,
            pins: pins,
            evaluator: evaluator
        )
    }

    func get(_ server: OpenSSLServer, _ configuration: TLSConfiguration) async throws -> Int {
        try await fetch(server, configuration).0
    }

    /// What the impostor appends to its own self-signed certificate, and the pin the victim set.
    struct Impostor: Sendable, CustomTestStringConvertible {
        let appended: String
        let pinned: String
        let kind: TLSPin.Kind
        var testDescription: String { "\(self.kind == .spki ? "key" : "certificate") pin on \(self.pinned)" }
    }

    static let impostors: [Impostor] = [
        // The genuine self-signed accessory's certificate, pinned by key and by certificate.
        Impostor(appended: "self.pem", pinned: "self.pem", kind: .spki),
        Impostor(appended: "self.pem", pinned: "self.pem", kind: .certificate),
        // A genuine CA chain: the intermediate and the root, pinned by key and certificate.
        Impostor(appended: "int+ca.pem", pinned: "int.pem", kind: .spki),
        Impostor(appended: "int+ca.pem", pinned: "int.pem", kind: .certificate),
        Impostor(appended: "int+ca.pem", pinned: "ca.pem", kind: .spki),
        Impostor(appended: "int+ca.pem", pinned: "ca.pem", kind: .certificate),
    ]

    @Test(arguments: Self.impostors)
    func anImpostorAppendingTheGenuineCertificateIsRefused(_ impostor: Impostor) async throws {
        // other.pem: the impostor's own self-signed certificate, also for accessory.local.
        let server = try await OpenSSLServer.start(
            ["-cert", "other.pem", "-key", "other.key", "-cert_chain", impostor.appended],
            certificates: self.certificates
        )
        defer { server.stop() }
        let pin = try self.pin(impostor.pinned, impostor.kind)
        for name in ["accessory.local", nil] as [String?] {
            await #expect {
                _ = try await self.get(server, .client(serverName: name, trust: self.trust(pins: [pin])))
            } throws: { error in
                let tls = TLSErrors.find(in: error)
                return tls?.code == .pinMismatch && tls?.message.contains("Impostor") == true
            }
        }
    }

    struct HonestChain: Sendable, CustomTestStringConvertible {
        let leaf: String
        let key: String
        let chain: String?
        let anchors: [String]
        let pinned: String
        let kind: TLSPin.Kind
        var testDescription: String { "\(self.leaf) pinned on \(self.pinned) (\(self.kind))" }
    }

    static let honestChains: [HonestChain] = [
        // The CA is sent by the accessory and pinned; no anchor configured.
        HonestChain(
            leaf: "leafint.pem",
            key: "leafint.key",
            chain: "int+ca.pem",
            anchors: [],
            pinned: "ca.pem",
            kind: .spki
        ),
        HonestChain(
            leaf: "leafint.pem",
            key: "leafint.key",
            chain: "int+ca.pem",
            anchors: [],
            pinned: "ca.pem",
            kind: .certificate
        ),
        HonestChain(
            leaf: "leafint.pem",
            key: "leafint.key",
            chain: "int+ca.pem",
            anchors: [],
            pinned: "int.pem",
            kind: .spki
        ),
        HonestChain(leaf: "server.pem", key: "server.key", chain: "ca.pem", anchors: [], pinned: "ca.pem", kind: .spki),
        // The CA is not sent but is a configured anchor: the verified chain holds it.
        HonestChain(
            leaf: "server.pem",
            key: "server.key",
            chain: nil,
            anchors: ["ca.pem"],
            pinned: "ca.pem",
            kind: .spki
        ),
        // The leaf itself.
        HonestChain(leaf: "self.pem", key: "self.key", chain: nil, anchors: [], pinned: "self.pem", kind: .certificate),
    ]

    @Test(arguments: Self.honestChains)
    func anHonestChainMeetsAPinOnItsCA(_ honest: HonestChain) async throws {
        let server = try await OpenSSLServer.start(
            ["-cert", honest.leaf, "-key", honest.key] + (honest.chain.map { ["-cert_chain", $0] } ?? []),
            certificates: self.certificates
        )
        defer { server.stop() }
        let pin = try self.pin(honest.pinned, honest.kind)
        let status = try await self.get(
            server,
            .client(serverName: "accessory.local", trust: self.trust(anchors: honest.anchors, pins: [pin]))
        )
        #expect(status == 200)
    }

    @Test func aPinOnAnUnrelatedCAIsNotMetByAChainThatCADidNotSign() async throws {
        // The genuine leaf, sent with a CA that did not sign it (the test client CA).
        let server = try await OpenSSLServer.start(
            ["-cert", "server.pem", "-key", "server.key", "-cert_chain", "clientca.pem"],
            certificates: self.certificates
        )
        defer { server.stop() }
        let pin = try self.pin("clientca.pem", .spki)
        await #expect {
            _ = try await self.get(server, .client(serverName: "accessory.local", trust: self.trust(pins: [pin])))
        } throws: { TLSErrors.find(in: $0)?.code == .pinMismatch }
    }

    @Test func anAppCallbackAnsweringTrustDoesNotClearAWrongName() async throws {
        let server = try await OpenSSLServer.start(
            ["-cert", "server.pem", "-key", "server.key"],
            certificates: self.certificates
        )
        defer { server.stop() }
        let trustAll = TLSServerTrustEvaluator { _ in .trust }
        await #expect {
            _ = try await self.get(
                server,
                .client(serverName: "toaster.local", trust: self.trust(anchors: ["ca.pem"], evaluator: trustAll))
            )
        } throws: { TLSErrors.find(in: $0)?.code == .nameMismatch }
    }

    @Test func chainVerifiedMeansTheChainAndTheName() async throws {
        let server = try await OpenSSLServer.start(
            ["-cert", "server.pem", "-key", "server.key"],
            certificates: self.certificates
        )
        defer { server.stop() }
        let seen = TrackedMutex<[String: Bool]>([:])
        // The evaluator the issue warns about: trust whatever a CA vouched for.
        let evaluator = TLSServerTrustEvaluator { facts in
            seen.withLock { $0[facts.expectedName ?? "-"] = facts.chainVerified }
            return facts.chainVerified ? .trust : .useDefault
        }
        await #expect(throws: (any Error).self) {
            _ = try await self.get(
                server,
                .client(serverName: "toaster.local", trust: self.trust(anchors: ["ca.pem"], evaluator: evaluator))
            )
        }
        let status = try await self.get(
            server,
            .client(serverName: "accessory.local", trust: self.trust(anchors: ["ca.pem"], evaluator: evaluator))
        )
        #expect(status == 200)
        #expect(seen.withLock { $0 } == ["toaster.local": false, "accessory.local": true])
    }

    @Test(arguments: [String(repeating: "a", count: 300), "", "two words", "nul\u{0}byte"])
    func anUnusableExpectedNameIsAClearErrorNotACrash(name: String) async throws {
        let server = try await OpenSSLServer.start(
            ["-cert", "self.pem", "-key", "self.key"],
            certificates: self.certificates
        )
        defer { server.stop() }
        let pin = try self.pin("self.pem", .spki)
        await #expect {
            _ = try await self.get(server, .client(serverName: name, trust: self.trust(pins: [pin])))
        } throws: { error in
            let tls = TLSErrors.find(in: error)
            return tls?.code == .invalidConfiguration && tls?.message.contains("expected TLS name") == true
        }
    }

    @Test func namesThatForgeTerminalOutputAreEscaped() async throws {
        let forged = try self.certificate("forged.pem")
        for text in [forged.subject, forged.subjectAlternativeNames] {
            #expect(!text.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "\(Array(text.utf8))")
            #expect(text.contains("key pin:"), "\(text)")
        }
        // OpenSSL escapes the subject its own way (\0A); the names are escaped by UntrustedText.
        #expect(forged.subjectAlternativeNames == "DNS:meter\\x0A  key pin:     sha256:FAKE\\x1B[8m")
        // And the error message a user would see.
        let server = try await OpenSSLServer.start(
            ["-cert", "forged.pem", "-key", "forged.key"],
            certificates: self.certificates
        )
        defer { server.stop() }
        let pin = try self.pin("self.pem", .spki)
        await #expect {
            _ = try await self.get(server, .client(trust: self.trust(pins: [pin])))
        } throws: { error in
            let message = TLSErrors.find(in: error)?.message ?? ""
            return message.contains("\\x1B[8m") && !message.contains("\u{1B}") && !message.contains("\n")
        }
    }
}
