import AccessoryCrypto
import HTTPTypes

/// The I/O-free HTTP authentication state for one logical request (and, optionally, the
/// requests that follow it on the same accessory).
///
/// Feed every response to ``next(request:response:)``. On a 401 it picks the strongest
/// challenge it can answer (Digest SHA-256, Digest MD5, then Basic), obtains credentials (the
/// configured ones first, then the provider), and returns the request to retry. Each distinct
/// set of credentials is tried once: a second 401 for the same credentials gives up, so the
/// caller sees the 401. A Digest `stale=true` retries with the new nonce and the same
/// credentials without asking again. The only suspension point is the user's provider.
package struct AuthenticationState: Sendable {
    /// A cap on 401s answered for one request, so a server that keeps sending `stale=true`
    /// with fresh nonces cannot loop forever.
    private static let maxAttempts = 5

    /// The scheme in use once a challenge has been answered.
    private enum Answer: Sendable {
        case basic
        case digest(DigestChallenge)
    }

    private let configuredCredentials: Credentials?
    private let provider: (any CredentialProvider)?
    private let preemptiveBasic: Bool
    private let makeCNonce: @Sendable () -> String

    private var attempts = 0
    private var tried: Set<Credentials> = []
    /// The credentials last sent, their scheme, and where they may be sent again.
    private var current: Credentials?
    private var answer: Answer?
    private var protectedOrigin: AccessoryOrigin?
    /// Requests sent per nonce, for `nc`.
    private var nonceCounts: [String: UInt32] = [:]

    /// - Parameters:
    ///   - credentials: Credentials known up front (from the URL or `--user`); tried first.
    ///   - provider: Asked when there are no (more) credentials to try.
    ///   - preemptiveBasic: Send Basic with `credentials` before any challenge (off by default,
    ///     as it discloses the password to whichever peer answers).
    ///   - cnonce: Makes Digest client nonces; injectable for tests.
    package init(
        credentials: Credentials? = nil,
        provider: (any CredentialProvider)? = nil,
        preemptiveBasic: Bool = false,
        cnonce: @escaping @Sendable () -> String = { secureRandomBytes(16).hexString }
    ) {
        self.configuredCredentials = credentials
        self.provider = provider
        self.preemptiveBasic = preemptiveBasic
        self.makeCNonce = cnonce
    }

    /// Adds an `Authorization` field before a request is sent, when one is already known to be
    /// needed: the scheme a previous challenge from the same accessory asked for (Digest with
    /// the next `nc`), or preemptive Basic if enabled. Requests that already carry an
    /// `Authorization` field, or go to another accessory, are returned unchanged.
    package mutating func authorize(_ request: HTTPRequest) -> HTTPRequest {
        guard request.headerFields[.authorization] == nil else { return request }
        if let current = self.current, let answer = self.answer, let protectedOrigin = self.protectedOrigin {
            let origin = AccessoryOrigin(scheme: request.scheme, authority: request.authority)
            guard origin.isSameAccessory(as: protectedOrigin) else { return request }
            return (try? self.authorized(request, with: current, answer: answer)) ?? request
        }
        guard self.preemptiveBasic, let credentials = self.configuredCredentials,
            let value = try? BasicAuthorization.value(for: credentials)
        else { return request }
        let origin = AccessoryOrigin(scheme: request.scheme, authority: request.authority)
        self.tried.insert(credentials)
        self.current = credentials
        self.answer = .basic
        self.protectedOrigin = origin
        var authorized = request
        authorized.headerFields[.authorization] = value
        return authorized
    }

    /// Decides what to do with `response`, which answered `request`.
    package mutating func next(request: HTTPRequest, response: HTTPResponse) async -> AuthenticationDecision {
        guard response.status == .unauthorized else {
            self.attempts = 0  // Accepted; a later request on this state starts afresh.
            return .done
        }
        self.attempts += 1
        guard self.attempts <= Self.maxAttempts else {
            return .giveUp(.credentialsRejected(user: self.current?.user ?? ""))
        }

        let challenges = AuthenticationChallenge.challenges(in: response.headerFields)
        let answer: Answer
        let challenge: AuthenticationChallenge
        switch Self.select(from: challenges) {
        case .success(let selected): (answer, challenge) = selected
        case .failure(let failure): return .giveUp(failure)
        }

        // stale=true: the credentials were right, only the nonce expired (RFC 7616 §3.3).
        if case .digest(let digest) = answer, digest.stale, let current = self.current {
            if case .digest(let previous) = self.answer, previous.nonce == digest.nonce {
                return .giveUp(.credentialsRejected(user: current.user))
            }
            return self.retry(request, with: current, answer: answer)
        }

        let candidate: Credentials?
        if self.current == nil, let configured = self.configuredCredentials {
            candidate = configured
        } else if let provider = self.provider {
            // The provider is the caller's code and may block (prompting on a terminal, say):
            // it never runs on a link's event loop.
            candidate = await withTaskExecutorPreference(globalConcurrentExecutor) {
                await provider.credentials(for: challenge, request: request)
            }
        } else {
            candidate = nil
        }
        guard let candidate else {
            if let current = self.current { return .giveUp(.credentialsRejected(user: current.user)) }
            return .giveUp(.noCredentials(realm: challenge.realm))
        }
        guard !self.tried.contains(candidate) else {
            return .giveUp(.credentialsRejected(user: candidate.user))
        }
        self.tried.insert(candidate)
        return self.retry(request, with: candidate, answer: answer)
    }

    private mutating func retry(_ request: HTTPRequest, with credentials: Credentials, answer: Answer)
        -> AuthenticationDecision
    {
        do {
            var retried = request
            retried.headerFields[.authorization] = nil
            retried = try self.authorized(retried, with: credentials, answer: answer)
            self.current = credentials
            self.answer = answer
            self.protectedOrigin = AccessoryOrigin(scheme: request.scheme, authority: request.authority)
            return .retry(retried)
        } catch {
            return .giveUp(error)
        }
    }

    private mutating func authorized(
        _ request: HTTPRequest,
        with credentials: Credentials,
        answer: Answer
    ) throws(AuthenticationFailure) -> HTTPRequest {
        var authorized = request
        switch answer {
        case .basic:
            authorized.headerFields[.authorization] = try BasicAuthorization.value(for: credentials)
        case .digest(let digest):
            let count = self.nonceCounts[digest.nonce, default: 0] &+ 1
            authorized.headerFields[.authorization] = try DigestAuthorization.value(
                challenge: digest,
                credentials: credentials,
                method: request.method.rawValue,
                uri: request.path ?? "/",
                nonceCount: count,
                cnonce: self.makeCNonce()
            )
            self.nonceCounts[digest.nonce] = count
        }
        return authorized
    }

    /// Picks the strongest challenge this client can answer: Digest by algorithm strength
    /// (first offered wins a tie), then Basic. If none is usable, reports why, naming e.g. an
    /// unknown Digest algorithm rather than a generic failure.
    private static func select(
        from challenges: [AuthenticationChallenge]
    ) -> Result<(Answer, AuthenticationChallenge), AuthenticationFailure> {
        guard !challenges.isEmpty else { return .failure(.noChallenge) }
        var best: (digest: DigestChallenge, challenge: AuthenticationChallenge)?
        var digestFailure: AuthenticationFailure?
        for challenge in challenges where challenge.scheme == "digest" {
            do {
                let digest = try DigestChallenge(challenge)
                if best.map({ digest.algorithm.strength > $0.digest.algorithm.strength }) ?? true {
                    best = (digest, challenge)
                }
            } catch {
                digestFailure = digestFailure ?? error
            }
        }
        if let best { return .success((.digest(best.digest), best.challenge)) }
        if let basic = challenges.first(where: { $0.scheme == "basic" }) { return .success((.basic, basic)) }
        if let digestFailure { return .failure(digestFailure) }
        return .failure(.unsupportedScheme(challenges.map(\.scheme)))
    }
}
