import AccessoryResponder
import Foundation
import HTTPTypes
import NIOCore

/// Builds the emulator's responses: JSON bodies with sorted keys, and JSON errors.
enum EmulatorResponses {
    /// A JSON response. `object` holds strings, numbers, booleans, arrays and dictionaries.
    static func json(
        _ object: [String: Any],
        status: HTTPResponse.Status = .ok,
        headerFields: HTTPFields = [:]
    ) -> ResponderResponse {
        var fields = headerFields
        fields[.contentType] = "application/json"
        let data: Data
        do {
            data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        } catch {
            // Only non-JSON values can get here, and the emulator builds none; answer honestly anyway.
            return ResponderResponse(
                status: .internalServerError,
                headerFields: [.contentType: "text/plain"],
                body: .bytes(ByteBuffer(string: "could not encode JSON\n"))
            )
        }
        var buffer = ByteBuffer()
        buffer.reserveCapacity(data.count + 1)
        buffer.writeBytes(data)
        buffer.writeInteger(UInt8(ascii: "\n"))
        return ResponderResponse(status: status, headerFields: fields, body: .bytes(buffer))
    }

    /// A JSON error: `{"error": message, "status": code}`.
    static func error(_ status: HTTPResponse.Status, _ message: String, headerFields: HTTPFields = [:])
        -> ResponderResponse
    {
        self.json(["error": message, "status": status.code], status: status, headerFields: headerFields)
    }

    static func notFound(_ path: String) -> ResponderResponse {
        self.error(.notFound, "no such endpoint: \(path)")
    }

    static func methodNotAllowed(_ allowed: [HTTPRequest.Method]) -> ResponderResponse {
        let allow = allowed.map(\.rawValue).joined(separator: ", ")
        return self.error(.methodNotAllowed, "method not allowed; use \(allow)", headerFields: [.allow: allow])
    }
}
