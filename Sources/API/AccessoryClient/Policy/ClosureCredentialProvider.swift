import HTTPTypes

/// A ``CredentialProvider`` backed by a closure.
///
/// ```swift
/// let provider = ClosureCredentialProvider { challenge, _ in
///     challenge.realm == "device" ? Credentials(user: "admin", password: pin) : nil
/// }
/// ```
public struct ClosureCredentialProvider: CredentialProvider {
    private let body: @Sendable (AuthenticationChallenge, HTTPRequest) async -> Credentials?

    /// Creates a provider that calls `body` for every challenge.
    public init(_ body: @escaping @Sendable (AuthenticationChallenge, HTTPRequest) async -> Credentials?) {
        self.body = body
    }

    /// Creates a provider that always answers with the same credentials.
    public init(_ credentials: Credentials) {
        self.body = { _, _ in credentials }
    }

    public func credentials(for challenge: AuthenticationChallenge, request: HTTPRequest) async -> Credentials? {
        await self.body(challenge, request)
    }
}
