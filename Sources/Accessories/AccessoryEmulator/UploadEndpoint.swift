import AccessoryCrypto
import AccessoryResponder

/// `POST|PUT /upload`: reads the body as it streams in and reports its length and SHA-256.
enum UploadEndpoint {
    static func respond(to request: ResponderRequest) async throws -> ResponderResponse {
        guard var digest = Digest(.sha256) else {
            return EmulatorResponses.error(.internalServerError, "SHA-256 is not available in this libcrypto")
        }
        var length = 0
        for try await chunk in request.body {
            length += chunk.readableBytes
            digest.update(chunk.readableBytesView)
        }
        return EmulatorResponses.json(["length": length, "sha256": digest.finalize().hexString])
    }
}
