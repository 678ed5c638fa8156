import AccessoryClient
import AccessoryCrypto
import AccessoryHTTP1
import AccessoryTransport
import HTTPTypes
import NIOCore
import Synchronization

/// A client on `spec` with every wait bounded, shut down however `body` ends.
func withClient<T>(
    _ spec: String,
    configure: (inout AccessoryClient.Configuration) -> Void = { _ in },
    _ body: (AccessoryClient) async throws -> T
) async throws -> T {
    var configuration = AccessoryClient.Configuration()
    configuration.defaultTimeout = .seconds(60)
    configuration.link.idleTimeout = .seconds(15)
    configure(&configuration)
    let client = AccessoryClient(transport: try DeviceSpec(parsing: spec).makeTransport(), configuration: configuration)
    do {
        let result = try await body(client)
        await client.shutdown()
        return result
    } catch {
        await client.shutdown()
        throw error
    }
}

extension AccessoryClient {
    /// Streams the body of `request` through SHA-256 without keeping it; returns the head,
    /// the number of body bytes and their hash.
    func hashedBody(_ request: AccessoryRequest) async throws -> (head: HTTPResponse, count: Int, sha256: String) {
        try await self.execute(request) { response in
            guard var digest = Digest(.sha256) else { throw TestFailure("SHA-256 is unavailable") }
            var count = 0
            for try await chunk in response.body {
                count += chunk.readableBytes
                digest.update(chunk.readableBytesView)
            }
            return (response.head, count, digest.finalize().hexString)
        }
    }

    /// `get(_:)` with request header fields.
    func get(_ path: String, headers fields: HTTPFields) async throws -> (HTTPResponse, ByteBuffer) {
        try await self.data(AccessoryRequest(method: .get, path: path, headerFields: fields))
    }
}

extension ByteBuffer {
    var bytes: [UInt8] { Array(self.readableBytesView) }
    var text: String { String(buffer: self) }
}

/// Collects a link's trace notes, to explain a failure.
final class TraceNotes: Sendable {
    private let notes = TrackedMutex<[String]>([])
    private let start = ContinuousClock.now

    var tracer: LinkTracer {
        LinkTracer { event in
            guard case .note(let note) = event else { return }
            let elapsed = ContinuousClock.now - self.start
            self.notes.withLock { $0.append("[\(elapsed)] \(note)") }
        }
    }

    var text: String { self.notes.withLock { $0.joined(separator: "; ") } }
}
