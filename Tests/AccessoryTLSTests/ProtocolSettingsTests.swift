import AccessoryClient
import AccessoryTLS
import AccessoryTransport
import Foundation
import Testing

/// Cipher suites, versions, and the errors that used to be unclear (issue 12, findings 6 and 9).
@Suite(.timeLimit(.minutes(2)))
struct ProtocolSettingsTests {
    let certificates: Certificates

    init() async throws { self.certificates = try await Certificates.get() }

    func configuration(
        minimumVersion: TLSVersion = .v1_2,
        identity: TLSIdentity? = nil
    ) -> TLSConfiguration {
        .client(
            serverName: "accessory.local",
            trust: TLSTrust(useSystemRoots: false, anchorFiles: [self.certificates.path("ca.pem")], trustStore: nil),
            identity: identity,
            minimumVersion: minimumVersion
        )
    }

    func get(_ server: OpenSSLServer, _ configuration: TLSConfiguration) async throws -> Int {
        try await fetch(server, configuration).0
    }

    func start(_ options: [String]) async throws -> OpenSSLServer {
        try await OpenSSLServer.start(
            ["-cert", "server.pem", "-key", "server.key"] + options,
            certificates: self.certificates
        )
    }

    /// OpenSSL's default TLS 1.2 list offers CBC-SHA1 suites; ours offers ECDHE + AEAD only.
    @Test(arguments: ["ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA384"])
    func aTLS12ServerOfferingOnlyCBCIsRefused(cipher: String) async throws {
        let server = try await self.start(["-tls1_2", "-cipher", cipher])
        defer { server.stop() }
        await #expect {
            _ = try await self.get(server, self.configuration())
        } throws: { error in
            let tls = TLSErrors.find(in: error)
            return tls?.code == .handshakeFailed && tls?.message.contains("no cipher suite") == true
        }
    }

    @Test(arguments: ["ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"])
    func aTLS12ServerWithAnAEADSuiteWorks(cipher: String) async throws {
        let server = try await self.start(["-tls1_2", "-cipher", cipher])
        defer { server.stop() }
        #expect(try await self.get(server, self.configuration()) == 200)
    }

    /// Lowering the minimum makes TLS 1.0 work…
    @Test func aLoweredMinimumReachesATLS10Server() async throws {
        let server = try await self.start(["-tls1", "-cipher", "DEFAULT@SECLEVEL=0"])
        defer { server.stop() }
        #expect(try await self.get(server, self.configuration(minimumVersion: .v1_0)) == 200)
    }

    /// …without weakening TLS 1.2: SHA-1 handshake signatures stay refused there.
    @Test func aLoweredMinimumStillRefusesSHA1SignaturesOnTLS12() async throws {
        let server = try await self.start(["-tls1_2", "-sigalgs", "ECDSA+SHA1", "-cipher", "DEFAULT@SECLEVEL=0"])
        defer { server.stop() }
        await #expect {
            _ = try await self.get(server, self.configuration(minimumVersion: .v1_0))
        } throws: { TLSErrors.find(in: $0)?.code == .handshakeFailed }
    }

    /// TLS 1.2 reports a missing client certificate as a bare handshake_failure alert.
    @Test(arguments: ["-tls1_2", "-tls1_3"])
    func aRequiredClientCertificateIsNamedOnEveryVersion(version: String) async throws {
        let server = try await self.start([version, "-Verify", "1", "-verify_return_error", "-CAfile", "clientca.pem"])
        defer { server.stop() }
        await #expect {
            _ = try await self.get(server, self.configuration())
        } throws: { error in
            TLSErrors.find(in: error)?.message.contains("requires a client certificate") == true
        }
    }

    @Test func aLegacyPKCS12SaysHowToReExportIt() async throws {
        let server = try await self.start([])
        defer { server.stop() }
        let identity = TLSIdentity.pkcs12(file: self.certificates.path("legacy.p12"), password: "p12secret")
        await #expect {
            _ = try await self.get(server, self.configuration(identity: identity))
        } throws: { error in
            let tls = TLSErrors.find(in: error)
            return tls?.code == .invalidConfiguration && tls?.message.contains("legacy algorithm") == true
                && tls?.message.contains("openssl pkcs12 -legacy") == true
                && tls?.message.contains("wrong password") == false
        }
    }
}

/// The trust store refuses what others could write, like ssh's StrictModes (issue 12, finding 5).
@Suite struct TrustStoreHygieneTests {
    func scratch() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("trust-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test func aDirectoryOthersCanWriteIsRefused() throws {
        let directory = try self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = TrustStore(userDirectory: directory)
        try store.remember(identity: "meter", pin: TLSPin(kind: .spki, digest: Array(repeating: 7, count: 32)))
        #expect(try store.entry(for: "meter") != nil)
        chmod(directory, 0o777)
        #expect {
            _ = try store.entries()
        } throws: { error in
            let tls = error as? TLSError
            return tls?.code == .trustStoreError && tls?.message.contains("chmod go-w '\(directory)'") == true
        }
        #expect(throws: TLSError.self) { _ = try store.anchorFiles() }
        #expect(throws: TLSError.self) {
            try store.remember(identity: "other", pin: TLSPin(kind: .spki, digest: Array(repeating: 8, count: 32)))
        }
    }

    @Test func aFileOthersCanWriteIsRefused() throws {
        let directory = try self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        chmod(directory, 0o700)
        let store = TrustStore(userDirectory: directory)
        try store.remember(identity: "meter", pin: TLSPin(kind: .spki, digest: Array(repeating: 7, count: 32)))
        chmod(directory + "/known_accessories", 0o666)
        #expect {
            _ = try store.entry(for: "meter")
        } throws: { ($0 as? TLSError)?.message.contains("every user") == true }
        _ = FileManager.default.createFile(atPath: directory + "/rogue.pem", contents: Data("x".utf8))
        chmod(directory + "/known_accessories", 0o600)
        chmod(directory + "/rogue.pem", 0o664)
        #expect {
            _ = try store.anchorFiles()
        } throws: { ($0 as? TLSError)?.message.contains("rogue.pem") == true }
    }

    @Test func writesLeaveNoTemporaryFilesAndNeverFollowAPlantedLink() throws {
        let directory = try self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = TrustStore(userDirectory: directory)
        // The old code wrote through a fixed name: known_accessories.tmp.PID.
        let victim = directory + "/victim"
        _ = FileManager.default.createFile(atPath: victim, contents: Data("untouched".utf8))
        try FileManager.default.createSymbolicLink(
            atPath: directory + "/known_accessories.tmp.\(getpid())",
            withDestinationPath: victim
        )
        for index in 0..<8 {
            try store.remember(
                identity: "m\(index)",
                pin: TLSPin(kind: .spki, digest: Array(repeating: UInt8(index), count: 32))
            )
        }
        #expect(try store.entries().count == 8)
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "untouched")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(!names.contains { $0.hasSuffix(".tmp") }, "\(names)")
    }
}
