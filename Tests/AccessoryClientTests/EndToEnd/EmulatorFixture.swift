import AccessoryClient
import AccessoryCrypto
import AccessoryEmulator
import AccessoryHTTP1
import Foundation
import HTTPTypes
import NIOCore
import NIOPosix

/// A client wired to a fresh emulated accessory over real socketpairs.
func makeEmulatorClient(_ configure: (inout AccessoryClient.Configuration) -> Void = { _ in }) -> AccessoryClient {
    var configuration = AccessoryClient.Configuration()
    configure(&configuration)
    let transport = EmulatedAccessory().socketPairTransport(on: MultiThreadedEventLoopGroup.singleton)
    return AccessoryClient(transport: transport, configuration: configuration)
}

/// SHA-256 of the emulator's pattern bytes for `/bytes/N` and `/stream/N`.
func expectedPatternSHA256(count: Int) -> String {
    guard var digest = Digest(.sha256) else { return "" }
    var offset = 0
    while offset < count {
        let length = min(1 << 20, count - offset)
        digest.update(EmulatedAccessory.patternBytes(offset: offset, count: length))
        offset += length
    }
    return digest.finalize().hexString
}

func sha256(_ buffer: ByteBuffer) -> String {
    buffer.withUnsafeReadableBytes { Digest.hex(.sha256, of: $0) }
}

func jsonObject(_ buffer: ByteBuffer) throws -> [String: Any] {
    let data = Data(buffer.readableBytesView)
    return (try JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:]
}

func temporaryPath(_ name: String) -> String {
    NSTemporaryDirectory() + "accessory-http-tests-\(UUID().uuidString)-\(name)"
}

/// Fails the test instead of hanging when `body` takes longer than `seconds`.
func withTimeLimit<T: Sendable>(
    _ seconds: Double,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw TimeLimitExceeded(seconds: seconds)
        }
        return value
    }
}

struct TimeLimitExceeded: Error, CustomStringConvertible {
    let seconds: Double
    var description: String { "the test did not finish within \(seconds) s" }
}
