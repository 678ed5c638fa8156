import AccessoryBridge
import AccessoryClient
import AccessoryCrypto
import AccessoryEmulator
import AccessoryTestSupport
import AccessoryTransport
import Glibc
import Logging
import NIOPosix

/// An `AccessoryBridge` in this process in front of the emulated accessory (or any transport),
/// listening on a unix socket in a temporary directory and on 127.0.0.1 (a free port); always
/// shut down by ``stop()``.
final class BridgeFixture: Sendable {
    let directory: TemporaryDirectory
    let socket: String
    let port: Int
    let bridge: AccessoryBridge
    let client: AccessoryClient
    private let serving: Task<Void, Never>

    init(
        transport: (any ByteStreamTransport)? = nil,
        http2: Bool = false,
        configure: (inout AccessoryBridge.Configuration) -> Void = { _ in }
    ) async throws {
        self.directory = try TemporaryDirectory("bridge")
        self.socket = self.directory.path("accessory.sock")
        var clientConfiguration = AccessoryClient.Configuration()
        clientConfiguration.redirects = .none
        if http2 { clientConfiguration.link.httpVersion = .http2 }
        self.client = AccessoryClient(
            transport: transport ?? EmulatedAccessory().socketPairTransport(on: MultiThreadedEventLoopGroup.singleton),
            configuration: clientConfiguration
        )
        var configuration = AccessoryBridge.Configuration()
        configuration.device = "emulator"
        configuration.gracePeriod = TimeBounds.scaled(.seconds(5))
        // The default limit follows the client's link (100 exchanges on HTTP/2): the HTTP/2
        // sharing test relies on it, so a default of one at a time fails there.
        configure(&configuration)
        var logger = Logger(label: "test.bridge")
        logger.logLevel = .warning  // one line per request at info would bury the test output
        let bridge = AccessoryBridge(client: self.client, configuration: configuration, logger: logger)
        self.bridge = bridge
        let bound = try await bridge.bind([.unix(path: self.socket), .tcp(host: "127.0.0.1", port: 0)])
        guard case .tcp(_, let port) = bound[1] else { throw TestFailure("no TCP port bound") }
        self.port = port
        self.serving = Task { await bridge.run() }
    }

    var baseURL: String { "http://127.0.0.1:\(self.port)" }

    func stop() async {
        await self.bridge.shutdown()
        await self.serving.value
        await self.client.shutdown()
        self.directory.remove()
    }
}

/// Runs `body` with a bridge, stopping it however `body` ends.
func withBridge<T>(
    transport: (any ByteStreamTransport)? = nil,
    http2: Bool = false,
    configure: (inout AccessoryBridge.Configuration) -> Void = { _ in },
    _ body: (BridgeFixture) async throws -> T
) async throws -> T {
    let fixture = try await BridgeFixture(transport: transport, http2: http2, configure: configure)
    do {
        let result = try await body(fixture)
        await fixture.stop()
        return result
    } catch {
        await fixture.stop()
        throw error
    }
}

/// The SHA-256 of the first `count` bytes of the emulator's `/bytes/N` pattern.
func patternSHA256(count: Int) -> String {
    guard var digest = Digest(.sha256) else { return "" }
    var offset = 0
    while offset < count {
        let block = min(1 << 20, count - offset)
        digest.update(EmulatedAccessory.patternBytes(offset: offset, count: block))
        offset += block
    }
    return digest.finalize().hexString
}
