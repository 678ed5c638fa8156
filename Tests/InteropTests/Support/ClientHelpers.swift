import AccessoryClient
import AccessoryCrypto
import AccessoryTransport
import HTTPTypes
import NIOCore

/// A client on `spec` with every wait bounded, shut down however `body` ends.
func withClient<T>(_ spec: String, _ body: (AccessoryClient) async throws -> T) async throws -> T {
    var configuration = AccessoryClient.Configuration()
    configuration.defaultTimeout = .seconds(60)
    configuration.link.idleTimeout = .seconds(15)
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

    func get(_ path: String, _ fields: HTTPFields = [:]) async throws -> (HTTPResponse, ByteBuffer) {
        try await self.data(AccessoryRequest(method: .get, path: path, headerFields: fields))
    }
}

extension ByteBuffer {
    var bytes: [UInt8] { Array(self.readableBytesView) }
    var text: String { String(buffer: self) }
}
