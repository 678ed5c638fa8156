import Foundation

/// The `Authorization` value for the Basic scheme (RFC 7617).
package enum BasicAuthorization {
    /// `Basic base64(user ":" password)`, both encoded as UTF-8 (RFC 7617 §2.1).
    /// - Throws: ``AuthenticationFailure/invalidCredentials(_:)`` if the user name contains a
    ///   colon, which the scheme cannot carry (RFC 7617 §2).
    package static func value(for credentials: Credentials) throws(AuthenticationFailure) -> String {
        guard !credentials.user.contains(":") else {
            throw .invalidCredentials("a Basic user name cannot contain ':'")
        }
        let pair = Data("\(credentials.user):\(credentials.password)".utf8)
        return "Basic \(pair.base64EncodedString())"
    }
}
