import AccessoryResponder
import Foundation
import HTTPTypes

/// `/basic-auth/USER/PASS`: `401` with a Basic challenge unless the request carries exactly
/// these credentials.
enum BasicAuthEndpoint {
    static let realm = "accessory"

    static func respond(to head: HTTPRequest, user: String, password: String) -> ResponderResponse {
        guard let presented = Self.credentials(in: head), presented.user == user, presented.password == password else {
            return EmulatorResponses.json(
                ["authenticated": false],
                status: .unauthorized,
                headerFields: [.wwwAuthenticate: "Basic realm=\"\(Self.realm)\""]
            )
        }
        return EmulatorResponses.json(["authenticated": true, "user": user])
    }

    /// The user and password of an `Authorization: Basic …` header, if it has a valid one.
    static func credentials(in head: HTTPRequest) -> (user: String, password: String)? {
        guard let value = head.headerFields[.authorization] else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "basic",
            let data = Data(base64Encoded: String(parts[1]).trimmingCharacters(in: .whitespaces)),
            let decoded = String(data: data, encoding: .utf8),
            let colon = decoded.firstIndex(of: ":")
        else { return nil }
        return (String(decoded[..<colon]), String(decoded[decoded.index(after: colon)...]))
    }
}
