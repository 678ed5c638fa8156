import Foundation

/// A Digest challenge (RFC 7616 §3.3) validated from an ``AuthenticationChallenge``.
package struct DigestChallenge: Sendable, Hashable {
    package var realm: String
    package var nonce: String
    package var opaque: String?
    package var algorithm: DigestAlgorithm
    /// Whether the server sent `algorithm` at all; it is echoed only then (RFC 2617 peers).
    package var algorithmWasSent: Bool
    /// `true` for qop `auth`; `false` for the RFC 2069 form without qop, nc and cnonce.
    package var usesQOP: Bool
    /// The previous nonce was merely too old; retry with the same credentials.
    package var stale: Bool
    /// The server wants the user name hashed (RFC 7616 §3.4.4).
    package var userhash: Bool

    /// Validates `challenge`.
    /// - Throws: ``AuthenticationFailure`` naming an unknown algorithm, a qop list without
    ///   `auth`, or a missing nonce.
    package init(_ challenge: AuthenticationChallenge) throws(AuthenticationFailure) {
        let parameters = challenge.parameters
        guard let nonce = parameters["nonce"], !nonce.isEmpty else {
            throw .malformedChallenge("Digest challenge without a nonce")
        }
        let algorithmToken = parameters["algorithm"]
        guard let algorithm = DigestAlgorithm(token: algorithmToken ?? "MD5") else {
            throw .unsupportedAlgorithm(algorithmToken ?? "")
        }
        var usesQOP = false
        if let qop = parameters["qop"] {
            let offered = qop.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard offered.contains("auth") else { throw .unsupportedQOP(qop) }
            usesQOP = true
        }
        if algorithm.isSession && !usesQOP {
            // A -sess A1 needs a cnonce, which is only sent together with qop.
            throw .malformedChallenge("\(algorithm.rawValue) without qop")
        }
        self.realm = parameters["realm"] ?? ""
        self.nonce = nonce
        self.opaque = parameters["opaque"]
        self.algorithm = algorithm
        self.algorithmWasSent = algorithmToken != nil
        self.usesQOP = usesQOP
        self.stale = parameters["stale"]?.lowercased() == "true"
        self.userhash = parameters["userhash"]?.lowercased() == "true"
    }
}
