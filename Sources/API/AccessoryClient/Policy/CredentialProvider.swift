import HTTPTypes

/// Supplies credentials when an accessory answers `401 Unauthorized`.
///
/// The client asks only after a challenge arrives, so a provider can prompt a user or look
/// up a keychain lazily. It is asked again only if the previous credentials were rejected.
public protocol CredentialProvider: Sendable {
    /// Returns credentials for `challenge`, or `nil` to give up (the 401 is then returned).
    /// - Parameters:
    ///   - challenge: The challenge the client chose to answer (Digest preferred over Basic).
    ///   - request: The request that was refused.
    func credentials(for challenge: AuthenticationChallenge, request: HTTPRequest) async -> Credentials?
}
