import AccessoryClient
import AccessoryEmulator
import AccessoryHTTP1
import AccessoryResponder
import AccessoryTLS
import AccessoryTransport
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// Our responder serving HTTPS; `openssl s_client` and our own client talk to it.
@Suite(.timeLimit(.minutes(2)))
struct ResponderTLSTests {
    let certificates: Certificates

    init() async throws { self.certificates = try await Certificates.get() }

    /// Serves the emulator over TLS on a fresh unix socket while `body` runs.
    func withTLSResponder(
        clientAuthentication: TLSClientAuthentication = .none,
        _ body: (String) async throws -> Void
    ) async throws {
        try await AccessoryTLSTests.withTLSResponder(
            self.certificates,
            clientAuthentication: clientAuthentication,
            body
        )
    }

    /// socat relays the TLS bytes without knowing TLS; killing it mid-body closes the link
    /// with no close_notify, as a pulled cable or a crashed accessory would.
    @Test func truncationWithoutCloseNotifyFailsAndTheNextRequestWorks() async throws {
        try await self.withTLSResponder { path in
            let relay = path + ".relay"
            // socat, killed, leaves its socket file.
            defer { unlink(relay) }
            func startRelay() async throws -> Subprocess {
                let socat = try Subprocess(["socat", "UNIX-LISTEN:\(relay),unlink-early", "UNIX-CONNECT:\(path)"])
                for _ in 0..<300 where !FileManager.default.fileExists(atPath: relay) {
                    try await Task.sleep(for: .milliseconds(10))
                }
                try #require(FileManager.default.fileExists(atPath: relay), "socat did not start: \(socat.stderrText)")
                // socat creates the file at bind(), a moment before listen(); a probe connection
                // would use up its single accept, so give it that moment instead.
                try await Task.sleep(for: .milliseconds(200))
                return socat
            }
            let trust = TLSTrust(
                useSystemRoots: false,
                anchorFiles: [self.certificates.path("ca.pem")],
                trustStore: nil
            )
            let client = AccessoryClient(
                transport: TLSTransport(
                    wrapping: UnixSocketTransport(path: relay),
                    configuration: .client(serverName: "accessory.local", trust: trust)
                )
            )
            defer { Task { await client.shutdown() } }

            let first = try await startRelay()
            defer { first.stop() }
            let size = 64 * 1024 * 1024
            let received = TrackedMutex(0)
            await #expect {
                _ = try await client.execute(AccessoryRequest(path: "/bytes/\(size)")) { response in
                    var killed = false
                    for try await part in response.body {
                        received.withLock { $0 += part.readableBytes }
                        if !killed {
                            killed = true
                            // SIGKILL: the link just ends, with no close_notify (socat would finish on SIGTERM).
                            kill(first.process.processIdentifier, SIGKILL)
                        }
                    }
                }
            } throws: { error in
                // Never a silently short body: the exchange fails, naming the closed link.
                let text = "\(error)"
                return text.contains("closed") || text.contains("truncat")
            }
            #expect(received.withLock { $0 } < size)

            let second = try await startRelay()
            defer { second.stop() }
            let (head, body) = try await client.data(AccessoryRequest(path: "/status"))
            #expect(head.status == .ok)
            #expect(String(buffer: body).contains("AH-EMU-1"))
            #expect(client.link.openCount == 2)
        }
    }

    @Test func openSSLClientGetsStatusOverTLS() async throws {
        try await self.withTLSResponder { path in
            let client = try Subprocess(
                [
                    "openssl", "s_client", "-unix", path, "-quiet", "-verify_return_error", "-CAfile", "ca.pem",
                    "-servername", "accessory.local", "-verify_hostname", "accessory.local",
                ],
                directory: self.certificates.directory,
                stdin: "GET /status HTTP/1.1\r\nHost: accessory\r\nConnection: close\r\n\r\n"
            )
            defer { client.stop() }
            let result = await client.wait(limit: .seconds(15))
            #expect(
                result.stdout.hasPrefix("HTTP/1.1 200 OK"),
                "stdout: \(result.stdout.prefix(300)) stderr: \(result.stderr.prefix(500))"
            )
            #expect(result.stdout.contains("AH-EMU-1"))
            #expect(result.stderr.contains("verify return:1"), "\(result.stderr)")
        }
    }

    @Test func openSSLClientWithoutCertificateIsRefusedWhenRequired() async throws {
        try await self.withTLSResponder(
            clientAuthentication: .required(trustedCAFiles: [self.certificates.path("clientca.pem")])
        ) { path in
            let without = try Subprocess(
                ["openssl", "s_client", "-unix", path, "-quiet", "-CAfile", "ca.pem"],
                directory: self.certificates.directory,
                stdin: "GET /status HTTP/1.1\r\nHost: accessory\r\nConnection: close\r\n\r\n"
            )
            defer { without.stop() }
            let refused = await without.wait(limit: .seconds(15))
            #expect(!refused.stdout.contains("200 OK"))
            #expect(
                refused.stderr.contains("certificate required") || refused.stderr.contains("alert"),
                "\(refused.stderr)"
            )

            let with = try Subprocess(
                [
                    "openssl", "s_client", "-unix", path, "-quiet", "-CAfile", "ca.pem", "-cert", "client.pem", "-key",
                    "client.key",
                ],
                directory: self.certificates.directory,
                stdin: "GET /status HTTP/1.1\r\nHost: accessory\r\nConnection: close\r\n\r\n"
            )
            defer { with.stop() }
            let accepted = await with.wait(limit: .seconds(15))
            #expect(accepted.stdout.hasPrefix("HTTP/1.1 200 OK"), "\(accepted.stderr)")
        }
    }

    @Test func curlGetsStatusOverTLS() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/curl") else { return }
        try await self.withTLSResponder { path in
            let result = try await Subprocess.run(
                [
                    "curl", "-sS", "--max-time", "10", "--unix-socket", path, "--cacert", "ca.pem",
                    "https://accessory.local/status",
                ],
                directory: self.certificates.directory
            )
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.contains("AH-EMU-1"))
        }
    }

    /// Many requests on one kept-alive TLS link, both sides ours.
    @Test func nativeClientKeepsTheTLSLinkAlive() async throws {
        try await self.withTLSResponder { path in
            let trust = TLSTrust(
                useSystemRoots: false,
                anchorFiles: [self.certificates.path("ca.pem")],
                trustStore: nil
            )
            let client = AccessoryClient(
                transport: TLSTransport(
                    wrapping: UnixSocketTransport(path: path),
                    configuration: .client(serverName: "accessory.local", trust: trust)
                )
            )
            defer { Task { await client.shutdown() } }
            for size in [0, 1, 5000, 200_000] {
                let (response, body) = try await client.data(AccessoryRequest(path: "/bytes/\(size)"))
                #expect(response.status.code == 200)
                #expect(body.readableBytes == size)
            }
            var upload = AccessoryRequest(method: .post, path: "/echo")
            upload.body = .bytes(ByteBuffer(repeating: 0x61, count: 100_000))
            let (echoed, echoBody) = try await client.data(upload)
            #expect(echoed.status.code == 200)
            #expect(echoBody.readableBytes >= 100_000)
        }
    }

    /// A handshake failure leaves no half-open link: the same client's next request reopens
    /// and works. The app's trust callback sees the DER chain.
    @Test func nextRequestWorksAfterAHandshakeFailure() async throws {
        try await self.withTLSResponder { path in
            let calls = TrackedMutex(0)
            let sawDER = TrackedMutex(false)
            var trust = TLSTrust(
                useSystemRoots: false,
                anchorFiles: [self.certificates.path("ca.pem")],
                trustStore: nil
            )
            trust.evaluator = TLSServerTrustEvaluator { facts in
                sawDER.withLock { $0 = facts.certificates.first?.der.first == 0x30 && facts.chainVerified }
                let call = calls.withLock { value in
                    value += 1
                    return value
                }
                return call == 1 ? .reject("first attempt refused by the test") : .useDefault
            }
            let client = AccessoryClient(
                transport: TLSTransport(
                    wrapping: UnixSocketTransport(path: path),
                    configuration: .client(serverName: "accessory.local", trust: trust)
                )
            )
            defer { Task { await client.shutdown() } }
            await #expect {
                _ = try await client.data(AccessoryRequest(path: "/status"))
            } throws: { error in
                TLSErrors.find(in: error)?.message.contains("first attempt refused by the test") == true
            }
            let (response, _) = try await client.data(AccessoryRequest(path: "/status"))
            #expect(response.status.code == 200)
            #expect(sawDER.withLock { $0 })
        }
    }

    /// The responder survives a client that fails the handshake (speaks plain HTTP).
    @Test func responderSurvivesAPlainTextClient() async throws {
        try await self.withTLSResponder { path in
            let plain = AccessoryClient(transport: UnixSocketTransport(path: path))
            var request = AccessoryRequest(path: "/status")
            request.timeout = .seconds(5)
            await #expect(throws: (any Error).self) { _ = try await plain.data(request) }
            await plain.shutdown()
            let trust = TLSTrust(
                useSystemRoots: false,
                anchorFiles: [self.certificates.path("ca.pem")],
                trustStore: nil
            )
            let client = AccessoryClient(
                transport: TLSTransport(
                    wrapping: UnixSocketTransport(path: path),
                    configuration: .client(serverName: "accessory.local", trust: trust)
                )
            )
            defer { Task { await client.shutdown() } }
            let (response, _) = try await client.data(AccessoryRequest(path: "/status"))
            #expect(response.status.code == 200)
        }
    }
}

/// Pairing (trust on first use) with a real trust store directory, against `s_server`.
@Suite(.timeLimit(.minutes(2)))
struct PairingTests {
    let certificates: Certificates

    init() async throws { self.certificates = try await Certificates.get() }

    @Test func firstUseRemembersSecondMatchesChangedKeyFailsClosed() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("trust-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = TrustStore(userDirectory: directory + "/trust", systemDirectory: nil)
        let trust = TLSTrust(
            useSystemRoots: false,
            trustStore: store,
            pairing: .init(identity: "kitchen-sensor", mode: .trustOnFirstUse)
        )
        let configuration = TLSConfiguration.client(trust: trust)

        func fetch(_ server: OpenSSLServer) async throws -> Int {
            let client = AccessoryClient(
                transport: TLSTransport(
                    wrapping: UnixSocketTransport(path: server.socket),
                    configuration: configuration
                )
            )
            defer { Task { await client.shutdown() } }
            return try await client.data(AccessoryRequest(path: "/")).0.status.code
        }

        let genuine = try await OpenSSLServer.start(
            ["-cert", "self.pem", "-key", "self.key"],
            certificates: self.certificates
        )
        defer { genuine.stop() }
        #expect(try await fetch(genuine) == 200)
        let remembered = try #require(try store.entry(for: "kitchen-sensor"))
        let expected = try TLSCertificate.load(pemFile: self.certificates.path("self.pem"))[0].spkiPin
        #expect(remembered.pin == expected)
        #expect(try await fetch(genuine) == 200)
        genuine.stop()

        let impostor = try await OpenSSLServer.start(
            ["-cert", "other.pem", "-key", "other.key"],
            certificates: self.certificates
        )
        defer { impostor.stop() }
        let impostorPin = try TLSCertificate.load(pemFile: self.certificates.path("other.pem"))[0].spkiPin
        await #expect {
            _ = try await fetch(impostor)
        } throws: { error in
            let tls = TLSErrors.find(in: error)
            return tls?.code == .pairingMismatch && tls?.message.contains(expected.description) == true
                && tls?.message.contains(impostorPin.description) == true
        }
        // Still the genuine key on file: the mismatch did not overwrite it.
        #expect(try store.entry(for: "kitchen-sensor")?.pin == expected)
    }

    /// `trustStore: nil` means no store: pairing then has nowhere to keep the key and is refused
    /// as a configuration error, before anything is opened (it quietly read and, on first use,
    /// wrote the user's standard store instead).
    @Test(arguments: [TLSTrust.Pairing.Mode.trustOnFirstUse, .requirePaired])
    func pairingWithoutATrustStoreIsRefused(mode: TLSTrust.Pairing.Mode) async throws {
        let trust = TLSTrust(useSystemRoots: false, trustStore: nil, pairing: .init(identity: "porch", mode: mode))
        let client = AccessoryClient(
            transport: TLSTransport(
                // Nothing listens here: a refusal before the open is the only way to get a TLSError.
                wrapping: UnixSocketTransport(path: "/nonexistent/accessory-http-\(UUID().uuidString).sock"),
                configuration: .client(trust: trust)
            )
        )
        defer { Task { await client.shutdown() } }
        await #expect {
            _ = try await client.data(AccessoryRequest(path: "/"))
        } throws: { error in
            let tls = TLSErrors.find(in: error)
            return tls?.code == .invalidConfiguration && tls?.message.contains("porch") == true
                && (error as? AccessoryClientError)?.code == .tlsConfiguration
        }
    }

    @Test func requirePairedRefusesAnUnknownAccessory() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("trust-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = TrustStore(userDirectory: directory, systemDirectory: nil)
        let server = try await OpenSSLServer.start(
            ["-cert", "self.pem", "-key", "self.key"],
            certificates: self.certificates
        )
        defer { server.stop() }
        let trust = TLSTrust(
            useSystemRoots: false,
            trustStore: store,
            pairing: .init(identity: "hall", mode: .requirePaired)
        )
        let client = AccessoryClient(
            transport: TLSTransport(
                wrapping: UnixSocketTransport(path: server.socket),
                configuration: .client(trust: trust)
            )
        )
        defer { Task { await client.shutdown() } }
        await #expect {
            _ = try await client.data(AccessoryRequest(path: "/"))
        } throws: { TLSErrors.find(in: $0)?.code == .untrustedCertificate }
        #expect(try store.entry(for: "hall") == nil)

        // Pair the way `accessory-http trust` does: fetch, show, remember.
        let session = try await TLSTransport.fetchCertificates(
            from: UnixSocketTransport(path: server.socket),
            on: MultiThreadedEventLoopGroup.singleton.next()
        )
        let leaf = try #require(session.peerCertificates.first)
        #expect(leaf.subject.contains("Self-signed Accessory"))
        try store.remember(identity: "hall", pin: leaf.spkiPin, comment: leaf.subject)
        let (response, _) = try await client.data(AccessoryRequest(path: "/"))
        #expect(response.status.code == 200)
    }
}

/// Pins and the known_accessories file, without a network peer.
struct PinAndStoreTests {
    @Test func pinsParseInBase64AndHex() throws {
        let digest = (0..<32).map { UInt8($0) }
        let pin = TLSPin(kind: .spki, digest: digest)
        #expect(try TLSPin(parsing: pin.description) == pin)
        let hex = digest.map { String(format: "%02X", $0) }.joined(separator: ":")
        #expect(try TLSPin(parsing: "sha256:" + hex) == pin)
        #expect(try TLSPin(parsing: "cert-sha256:" + pin.description.dropFirst(7)).kind == .certificate)
        #expect(throws: TLSError.self) { try TLSPin(parsing: "md5:abc") }
        #expect(throws: TLSError.self) { try TLSPin(parsing: "sha256:AAAA") }
    }

    @Test func storeRemembersReplacesAndForgets() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("trust-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = TrustStore(userDirectory: directory + "/a/b", systemDirectory: nil)
        let first = TLSPin(kind: .spki, digest: Array(repeating: 1, count: 32))
        let second = TLSPin(kind: .spki, digest: Array(repeating: 2, count: 32))
        try store.remember(identity: "one", pin: first, comment: "CN=One\nsneaky")
        try store.remember(identity: "two", pin: first)
        try store.remember(identity: "one", pin: second)
        #expect(try store.entry(for: "one")?.pin == second)
        #expect(try store.entries().count == 2)
        #expect(try store.forget(identity: "one"))
        #expect(try store.entry(for: "one") == nil)
        #expect(throws: TLSError.self) { try store.remember(identity: "has space", pin: first) }
        var info = stat()
        #expect(stat(directory + "/a/b/known_accessories", &info) == 0 && info.st_mode & 0o777 == 0o600)
    }
}

/// Serves the emulator over TLS (server.pem) on a fresh unix socket while `body` runs, with the
/// given client authentication and ALPN protocols.
func withTLSResponder(
    _ certificates: Certificates,
    clientAuthentication: TLSClientAuthentication = .none,
    applicationProtocols: [String] = [],
    _ body: (String) async throws -> Void
) async throws {
    let path = FileManager.default.temporaryDirectory
        .appendingPathComponent("tls-responder-\(UInt32.random(in: 0...UInt32.max)).sock").path
    var configuration = TLSConfiguration.server(
        identity: .pem(certificateFile: certificates.path("server.pem"), keyFile: certificates.path("server.key")),
        clientAuthentication: clientAuthentication
    )
    configuration.applicationProtocols = applicationProtocols
    let context = try TLSServerContext(configuration: configuration)
    let responder = EmulatedAccessory().makeResponder()
    let server = Task {
        try await responder.serveUnixSocket(
            path: path,
            group: MultiThreadedEventLoopGroup.singleton,
            channelInitializer: context.channelInitializer
        )
    }
    defer { server.cancel() }
    for _ in 0..<300 where !FileManager.default.fileExists(atPath: path) {
        try await Task.sleep(for: .milliseconds(10))
    }
    try #require(FileManager.default.fileExists(atPath: path))
    try await body(path)
}
