import AccessoryResponder
import Foundation
import HTTPTypes
import NIOCore

/// `/echo` (any method): the request as the accessory saw it.
enum EchoEndpoint {
    /// Bodies larger than this are refused with 413 rather than held in memory.
    static let maxBodySize = 1 << 20

    static func respond(to request: ResponderRequest) async throws -> ResponderResponse {
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: Self.maxBodySize)
        } catch let error as ResponderError where error.code == .bodyTooLarge {
            return EmulatorResponses.error(.contentTooLarge, "echo bodies are limited to \(Self.maxBodySize) bytes")
        }

        var headers: [String: String] = [:]
        if let authority = request.head.authority { headers["host"] = authority }
        for field in request.head.headerFields {
            let name = field.name.canonicalName
            if let existing = headers[name] {
                headers[name] = existing + ", " + field.value
            } else {
                headers[name] = field.value
            }
        }

        let bytes = Array(body.readableBytesView)
        var object: [String: Any] = [
            "method": request.head.method.rawValue,
            "path": request.head.path ?? "",
            "headers": headers,
            "bodyBase64": Data(bytes).base64EncodedString(),
            "bodyLength": bytes.count,
        ]
        if let text = String(validating: bytes, as: UTF8.self) {
            object["body"] = text
        }
        return EmulatorResponses.json(object)
    }
}
