import AccessoryClient
import AccessoryCrypto
import AccessoryEmulator
import AccessoryHTTP1
import AccessoryTLS
import AccessoryTestSupport
import AccessoryTransport
import AccessoryURLProtocol
import Foundation
import NIOPosix
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Four emulated accessories registered once in the shared route table: `emu0`…`emu3`, with
/// `http://emu-http.test/` mapped to `emu0`. `traced` counts the request heads it carries.
enum Fixture {
    static let names = ["emu0", "emu1", "emu2", "emu3"]

    /// Request heads seen by the `traced` accessory.
    static let tracedHeads = TrackedMutex<[String]>([])

    static let setUp: Void = {
        for name in Fixture.names {
            let transport = EmulatedAccessory().socketPairTransport(on: MultiThreadedEventLoopGroup.singleton)
            AccessoryRouteTable.shared.add(
                AccessoryRoute(
                    name: name,
                    transport: transport,
                    httpHosts: name == "emu0" ? ["emu-http.test"] : []
                )
            )
        }
        var traced = AccessoryClient.Configuration()
        traced.link.tracer = LinkTracer { event in
            if case .requestHead(let head) = event { Fixture.tracedHeads.withLock { $0.append(head) } }
        }
        AccessoryRouteTable.shared.add(
            AccessoryRoute(
                name: "traced",
                transport: EmulatedAccessory().socketPairTransport(on: MultiThreadedEventLoopGroup.singleton),
                clientConfiguration: traced
            )
        )
        var provided = AccessoryClient.Configuration()
        provided.credentialProvider = ClosureCredentialProvider(Credentials(user: "ann", password: "pw"))
        AccessoryRouteTable.shared.add(
            AccessoryRoute(
                name: "provided",
                transport: EmulatedAccessory().socketPairTransport(on: MultiThreadedEventLoopGroup.singleton),
                clientConfiguration: provided
            )
        )
        if let secure = SecureAccessory.start() {
            AccessoryRouteTable.shared.add(
                AccessoryRoute(
                    name: "secure",
                    transport: UnixSocketTransport(path: secure.socket),
                    tls: .client(
                        serverName: "secure.accessory",
                        trust: TLSTrust(useSystemRoots: false, anchorFiles: [secure.certificate], trustStore: nil)
                    )
                )
            )
            // The same accessory under a name its certificate does not carry, and with no anchor.
            for (name, serverName, anchors) in [
                ("secure-wrong-name", "toaster.accessory", [secure.certificate]),
                ("secure-untrusted", "secure.accessory", []),
            ] {
                AccessoryRouteTable.shared.add(
                    AccessoryRoute(
                        name: name,
                        transport: UnixSocketTransport(path: secure.socket),
                        tls: .client(
                            serverName: serverName,
                            trust: TLSTrust(useSystemRoots: false, anchorFiles: anchors, trustStore: nil)
                        )
                    )
                )
            }
        }
    }()

    /// A session set up in one line, as an app would.
    static func session(
        delegate: (any URLSessionDelegate)? = nil,
        _ configure: (URLSessionConfiguration) -> Void = { _ in }
    ) -> URLSession {
        _ = Fixture.setUp
        let configuration = URLSessionConfiguration.accessory([])
        configure(configuration)
        return URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    static func url(_ text: String) throws -> URL {
        guard let url = URL(string: text) else { throw FixtureError("not a URL: \(text)") }
        return url
    }
}

struct FixtureError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

func patternSHA256(count: Int) -> String {
    Digest.hex(.sha256, of: EmulatedAccessory.patternBytes(offset: 0, count: count))
}

func sha256(_ data: Data) -> String {
    Digest.hex(.sha256, of: Array(data))
}

func json(_ data: Data) throws -> [String: Any] {
    (try JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:]
}

/// `dataTask(with:completionHandler:)` as an async call (completion-handler delivery).
func completionHandlerLoad(_ session: URLSession, _ request: URLRequest) async -> (Data?, URLResponse?, (any Error)?) {
    await withCheckedContinuation { continuation in
        let task = session.dataTask(with: request) { data, response, error in
            let result = (data, response, error)
            continuation.resume(returning: result)
        }
        task.resume()
    }
}

/// A data delegate that records every chunk and the outcome.
final class RecordingDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // All state is behind `lock`; the proof is that every access below takes it.
    private let lock = NSLock()
    private var chunks: [Data] = []
    private var response: URLResponse?
    private var continuation: CheckedContinuation<(URLResponse?, [Data], (any Error)?), Never>?
    private var outcome: (URLResponse?, [Data], (any Error)?)?

    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        self.lock.withLock { self.response = response }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        self.lock.withLock { self.chunks.append(data) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let waiting: CheckedContinuation<(URLResponse?, [Data], (any Error)?), Never>? = self.lock.withLock {
            let result = (self.response, self.chunks, error)
            self.outcome = result
            defer { self.continuation = nil }
            return self.continuation
        }
        let result = self.lock.withLock { self.outcome }
        if let waiting, let result { waiting.resume(returning: result) }
    }

    /// Waits for the one task of this delegate to complete.
    func completion() async -> (URLResponse?, [Data], (any Error)?) {
        await withCheckedContinuation { continuation in
            let done = self.lock.withLock { () -> (URLResponse?, [Data], (any Error)?)? in
                if let outcome = self.outcome { return outcome }
                self.continuation = continuation
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }
}

/// The emulated accessory served over TLS on a unix socket, with a self-signed certificate for
/// `secure.accessory` made by the `openssl` command; the route trusts it as its only anchor.
enum SecureAccessory {
    struct Running {
        let socket: String
        let certificate: String
    }

    static func start() -> Running? {
        let directory = NSTemporaryDirectory() + "urlprotocol-tls-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        RemovedAtExit.add(directory)
        let certificate = directory + "/cert.pem"
        let key = directory + "/key.pem"
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", certificate, "-days", "30", "-subj", "/CN=secure.accessory",
            "-addext", "subjectAltName=DNS:secure.accessory",
        ]
        openssl.standardError = FileHandle.nullDevice
        openssl.standardOutput = FileHandle.nullDevice
        do {
            try openssl.run()
            openssl.waitUntilExit()
        } catch {
            return nil
        }
        guard openssl.terminationStatus == 0,
            let context = try? TLSServerContext(
                configuration: .server(identity: .pem(certificateFile: certificate, keyFile: key))
            )
        else { return nil }
        let socket = directory + "/accessory.sock"
        let responder = EmulatedAccessory().makeResponder()
        Task.detached {
            try? await responder.serveUnixSocket(
                path: socket,
                group: MultiThreadedEventLoopGroup.singleton,
                channelInitializer: context.channelInitializer
            )
        }
        return Running(socket: socket, certificate: certificate)
    }

    /// Waits until the secure accessory listens.
    static func ready() async throws -> Bool {
        _ = Fixture.setUp
        guard let route = AccessoryRouteTable.shared.routes.first(where: { $0.name == "secure" }),
            case .transport(let transport) = route.endpoint, let unix = transport as? UnixSocketTransport
        else { return false }
        for _ in 0..<300 {
            if FileManager.default.fileExists(atPath: unix.path) { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return false
    }
}
