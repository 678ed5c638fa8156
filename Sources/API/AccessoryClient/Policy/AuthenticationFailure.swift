/// Why the client stops answering `401 Unauthorized`. The client then returns the 401 to the
/// caller or maps this into its public error.
package enum AuthenticationFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The 401 carried no parsable `WWW-Authenticate` challenge.
    case noChallenge
    /// Only schemes this client cannot answer were offered (lowercased names).
    case unsupportedScheme([String])
    /// A Digest challenge named an algorithm this client does not implement.
    case unsupportedAlgorithm(String)
    /// A Digest challenge offered only qop values this client does not implement (`auth-int`).
    case unsupportedQOP(String)
    /// A challenge lacked something required (for Digest, the nonce).
    case malformedChallenge(String)
    /// No credentials were configured and the provider (if any) returned none.
    case noCredentials(realm: String?)
    /// The accessory refused the credentials already sent for this user.
    case credentialsRejected(user: String)
    /// The credentials cannot be expressed in the chosen scheme.
    case invalidCredentials(String)

    package var description: String {
        switch self {
        case .noChallenge:
            return "401 Unauthorized without a usable WWW-Authenticate challenge"
        case .unsupportedScheme(let schemes):
            return "unsupported authentication scheme(s): \(schemes.joined(separator: ", "))"
        case .unsupportedAlgorithm(let algorithm):
            return "unsupported Digest algorithm \(algorithm)"
        case .unsupportedQOP(let qop):
            return "unsupported Digest qop \(qop) (only auth is implemented)"
        case .malformedChallenge(let detail):
            return "malformed authentication challenge: \(detail)"
        case .noCredentials(let realm):
            return "no credentials for realm \(realm.map { "\"\($0)\"" } ?? "(none)")"
        case .credentialsRejected(let user):
            return "credentials for user \"\(user)\" were rejected"
        case .invalidCredentials(let detail):
            return "invalid credentials: \(detail)"
        }
    }
}
