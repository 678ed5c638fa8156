import AccessoryCrypto
import AccessoryResponder
import HTTPTypes
import NIOCore

/// `/trailers` (any method): answers chunked with the request's body (`trailers follow` and a
/// line break when it has none), then two trailer fields, announced in `Trailer`:
/// `Accessory-Body-SHA256`, the body's SHA-256 in hex, and `Accessory-Request-Trailers`, the
/// request's own trailer fields as `name=value` joined by `; ` (`none` when it had none). One
/// route shows trailers crossing a link both ways.
enum TrailersEndpoint {
    /// Bodies larger than this are refused with 413 rather than held in memory.
    static let maxBodySize = 1 << 20

    static let bodySHA256 = HTTPField.Name("Accessory-Body-SHA256")!
    static let requestTrailers = HTTPField.Name("Accessory-Request-Trailers")!

    static func respond(to request: ResponderRequest) async throws -> ResponderResponse {
        var body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: Self.maxBodySize)
        } catch let error as ResponderError where error.code == .bodyTooLarge {
            return EmulatorResponses.error(.contentTooLarge, "trailers bodies are limited to \(Self.maxBodySize) bytes")
        }
        if body.readableBytes == 0 { body = ByteBuffer(string: "trailers follow\n") }
        guard var digest = Digest(.sha256) else {
            return EmulatorResponses.error(.internalServerError, "SHA-256 is not available in this libcrypto")
        }
        digest.update(body.readableBytesView)
        var trailers = HTTPFields()
        trailers[Self.bodySHA256] = digest.finalize().hexString
        let received = request.body.trailers.map { fields in
            fields.map { "\($0.name.canonicalName)=\($0.value)" }.joined(separator: "; ")
        }
        trailers[Self.requestTrailers] = received ?? "none"
        var headers = HTTPFields()
        headers[.contentType] = "text/plain"
        headers[.trailer] = "\(Self.bodySHA256.rawName), \(Self.requestTrailers.rawName)"
        return ResponderResponse(
            status: .ok,
            headerFields: headers,
            body: .stream(length: nil) { [body, trailers] writer in
                try await writer.write(body)
                try writer.setTrailers(trailers)
            }
        )
    }
}
