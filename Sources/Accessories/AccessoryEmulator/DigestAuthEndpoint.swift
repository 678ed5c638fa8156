import AccessoryResponder
import HTTPTypes

/// `/digest-auth/QOP/USER/PASS[/ALGORITHM]`: an HTTP Digest server (RFC 7616, and RFC 2069 when
/// QOP is `none`) with `MD5`, `SHA-256`, `MD5-sess` and `SHA-256-sess`.
enum DigestAuthEndpoint {
    static let realm = "accessory"

    static func respond(
        to head: HTTPRequest,
        qop: String,
        user: String,
        password: String,
        algorithm algorithmName: String
    ) -> ResponderResponse {
        guard qop == "auth" || qop == "none" else {
            return EmulatorResponses.error(.badRequest, "qop must be auth or none")
        }
        guard let algorithm = EmulatorDigestAlgorithm(name: algorithmName) else {
            return EmulatorResponses.error(.badRequest, "algorithm must be MD5, SHA-256, MD5-sess or SHA-256-sess")
        }
        let usesQop = qop == "auth"

        guard let value = head.headerFields[.authorization], let parameters = DigestParameters(authorization: value)
        else {
            return Self.challenge(algorithm: algorithm, usesQop: usesQop, stale: false)
        }
        switch Self.verify(
            parameters,
            head: head,
            user: user,
            password: password,
            algorithm: algorithm,
            usesQop: usesQop
        ) {
        case .valid:
            return EmulatorResponses.json(["authenticated": true, "user": user])
        case .stale:
            return Self.challenge(algorithm: algorithm, usesQop: usesQop, stale: true)
        case .invalid:
            return Self.challenge(algorithm: algorithm, usesQop: usesQop, stale: false)
        }
    }

    static func verify(
        _ parameters: DigestParameters,
        head: HTTPRequest,
        user: String,
        password: String,
        algorithm: EmulatorDigestAlgorithm,
        usesQop: Bool
    ) -> DigestNonce.Verdict {
        guard parameters["username"] == user,
            parameters["realm"] == Self.realm,
            let nonce = parameters["nonce"],
            let uri = parameters["uri"], uri == head.path,
            let response = parameters["response"]
        else { return .invalid }
        if let opaque = parameters["opaque"], opaque != DigestNonce.opaque { return .invalid }
        if let named = parameters["algorithm"], EmulatorDigestAlgorithm(name: named) != algorithm { return .invalid }
        if parameters["algorithm"] == nil && algorithm.name != "MD5" { return .invalid }

        var ha1 = algorithm.h("\(user):\(Self.realm):\(password)")
        let ha2 = algorithm.h("\(head.method.rawValue):\(uri)")
        let expected: String
        if usesQop {
            guard parameters["qop"] == "auth", let nc = parameters["nc"], let cnonce = parameters["cnonce"] else {
                return .invalid
            }
            if algorithm.isSession { ha1 = algorithm.h("\(ha1):\(nonce):\(cnonce)") }
            expected = algorithm.h("\(ha1):\(nonce):\(nc):\(cnonce):auth:\(ha2)")
        } else {
            if algorithm.isSession {
                guard let cnonce = parameters["cnonce"] else { return .invalid }
                ha1 = algorithm.h("\(ha1):\(nonce):\(cnonce)")
            }
            expected = algorithm.h("\(ha1):\(nonce):\(ha2)")
        }
        guard DigestNonce.constantTimeEquals(response.lowercased(), expected) else { return .invalid }
        // The response is right; only now does an expired nonce count as stale rather than wrong.
        return DigestNonce.verify(nonce)
    }

    /// The `401` with a fresh challenge.
    static func challenge(algorithm: EmulatorDigestAlgorithm, usesQop: Bool, stale: Bool) -> ResponderResponse {
        var challenge = "Digest realm=\"\(Self.realm)\""
        if usesQop { challenge += ", qop=\"auth\"" }
        challenge += ", algorithm=\(algorithm.name), nonce=\"\(DigestNonce.issue())\", opaque=\"\(DigestNonce.opaque)\""
        if stale { challenge += ", stale=true" }
        return EmulatorResponses.json(
            ["authenticated": false],
            status: .unauthorized,
            headerFields: [.wwwAuthenticate: challenge]
        )
    }
}
