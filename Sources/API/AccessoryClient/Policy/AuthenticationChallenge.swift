import HTTPTypes

/// One challenge from a `WWW-Authenticate` header field (RFC 9110 §11.6.1), such as
/// `Digest realm="device", qop="auth", nonce="…"`.
public struct AuthenticationChallenge: Sendable, Hashable {
    /// The authentication scheme, lowercased (`basic`, `digest`, `negotiate`, …).
    public var scheme: String
    /// The auth-params with lowercased names and unquoted, unescaped values.
    public var parameters: [String: String]
    /// The token68 form some schemes use instead of parameters (`Negotiate abc==`).
    public var token68: String?

    /// Creates a challenge; `scheme` and parameter names are lowercased.
    public init(scheme: String, parameters: [String: String] = [:], token68: String? = nil) {
        self.scheme = scheme.lowercased()
        var lowered: [String: String] = [:]
        for (name, value) in parameters where lowered[name.lowercased()] == nil {
            lowered[name.lowercased()] = value
        }
        self.parameters = lowered
        self.token68 = token68
    }

    /// The protection space name, from the `realm` parameter.
    public var realm: String? { self.parameters["realm"] }

    /// Parses one `WWW-Authenticate` field value, which may hold several challenges.
    /// Malformed parts are skipped; whatever parsed is returned.
    public static func parse(_ fieldValue: String) -> [AuthenticationChallenge] {
        WWWAuthenticateParser.parse(fieldValue)
    }

    /// All challenges in all `WWW-Authenticate` fields of `fields`, in order.
    public static func challenges(in fields: HTTPFields) -> [AuthenticationChallenge] {
        fields[values: .wwwAuthenticate].flatMap { Self.parse($0) }
    }
}
