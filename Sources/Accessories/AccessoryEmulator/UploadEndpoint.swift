import AccessoryCrypto
import AccessoryResponder

/// `POST|PUT /upload`: reads the body as it streams in and reports its length and SHA-256.
/// `/upload?digest=none` reports the length only: it measures the transport where hashing
/// would be the bottleneck (under emulation, SHA-256 is slower than a USB link).
enum UploadEndpoint {
    static func respond(to request: ResponderRequest) async throws -> ResponderResponse {
        let query = request.head.path?.split(separator: "?", maxSplits: 1).dropFirst().first ?? ""
        if query.split(separator: "&").contains("digest=none") {
            var length = 0
            for try await chunk in request.body { length += chunk.readableBytes }
            return EmulatorResponses.json(["length": length])
        }
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
