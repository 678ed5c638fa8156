import HTTPTypes
import Testing

@testable import AccessoryClient

@Suite struct AuthenticationStateTests {
    static let request = HTTPRequest(method: .get, scheme: nil, authority: "accessory", path: "/dir/index.html")

    static func unauthorized(_ challenges: String...) -> HTTPResponse {
        var fields = HTTPFields()
        for challenge in challenges { fields.append(HTTPField(name: .wwwAuthenticate, value: challenge)) }
        return HTTPResponse(status: .unauthorized, headerFields: fields)
    }

    static func retried(_ decision: AuthenticationDecision) throws -> HTTPRequest {
        guard case .retry(let request) = decision else {
            Issue.record("expected retry, got \(decision)")
            throw CancellationError()
        }
        return request
    }

    @Test func notA401IsDone() async {
        var state = AuthenticationState(credentials: Credentials(user: "a", password: "b"))
        #expect(await state.next(request: Self.request, response: HTTPResponse(status: .ok)) == .done)
    }

    @Test func basicRetryThenGiveUpOnSecond401() async throws {
        var state = AuthenticationState(credentials: Credentials(user: "Aladdin", password: "open sesame"))
        let challenge = Self.unauthorized(#"Basic realm="device""#)
        let retry = try Self.retried(await state.next(request: Self.request, response: challenge))
        #expect(retry.headerFields[.authorization] == "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==")
        #expect(retry.path == Self.request.path)
        #expect(await state.next(request: retry, response: challenge) == .giveUp(.credentialsRejected(user: "Aladdin")))
    }

    @Test func noCredentialsGivesUp() async {
        var state = AuthenticationState()
        #expect(
            await state.next(request: Self.request, response: Self.unauthorized(#"Basic realm="device""#))
                == .giveUp(.noCredentials(realm: "device"))
        )
    }

    @Test func providerAskedAfterConfiguredCredentialsFail() async throws {
        let provider = ClosureCredentialProvider { challenge, _ in
            challenge.realm == "device" ? Credentials(user: "admin", password: "right") : nil
        }
        var state = AuthenticationState(credentials: Credentials(user: "admin", password: "wrong"), provider: provider)
        let challenge = Self.unauthorized(#"Basic realm="device""#)
        let first = try Self.retried(await state.next(request: Self.request, response: challenge))
        let second = try Self.retried(await state.next(request: first, response: challenge))
        #expect(first.headerFields[.authorization] != second.headerFields[.authorization])
        // The provider keeps answering the same credentials: they were tried, so give up.
        #expect(await state.next(request: second, response: challenge) == .giveUp(.credentialsRejected(user: "admin")))
    }

    @Test func digestPreferredAndSHA256Chosen() async throws {
        var state = AuthenticationState(
            credentials: DigestAuthorizationTests.mufasa,
            cnonce: { DigestAuthorizationTests.rfc7616CNonce }
        )
        let nonce = DigestAuthorizationTests.rfc7616Nonce
        let opaque = DigestAuthorizationTests.rfc7616Opaque
        let response = Self.unauthorized(
            #"Basic realm="http-auth@example.org""#,
            #"Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=MD5, nonce="\#(nonce)", opaque="\#(opaque)""#,
            #"Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=SHA-256, nonce="\#(nonce)", opaque="\#(opaque)""#
        )
        let retry = try Self.retried(await state.next(request: Self.request, response: response))
        let value = try #require(retry.headerFields[.authorization])
        #expect(value.contains("algorithm=SHA-256"))
        #expect(value.contains(#"response="753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1""#))
        #expect(value.contains("nc=00000001"))
        #expect(value.contains(#"opaque="\#(opaque)""#))

        // Later requests to the same accessory reuse the nonce with an incremented nc.
        let following = state.authorize(
            HTTPRequest(method: .get, scheme: nil, authority: "accessory", path: "/other?q=1")
        )
        #expect(following.headerFields[.authorization]?.contains("nc=00000002") == true)
        #expect(following.headerFields[.authorization]?.contains(#"uri="/other?q=1""#) == true)
        // ...but never another accessory.
        let elsewhere = state.authorize(HTTPRequest(method: .get, scheme: nil, authority: "other", path: "/"))
        #expect(elsewhere.headerFields[.authorization] == nil)
    }

    @Test func staleRetriesWithNewNonceWithoutAsking() async throws {
        let counter = Counter()
        let provider = ClosureCredentialProvider { _, _ in
            await counter.increment()
            return Credentials(user: "u", password: "p")
        }
        var state = AuthenticationState(provider: provider, cnonce: { "c" })
        let first = try Self.retried(
            await state.next(
                request: Self.request,
                response: Self.unauthorized(#"Digest realm="r", nonce="1", qop=auth"#)
            )
        )
        #expect(first.headerFields[.authorization]?.contains(#"nonce="1""#) == true)
        let second = try Self.retried(
            await state.next(
                request: first,
                response: Self.unauthorized(#"Digest realm="r", nonce="2", qop=auth, stale=TRUE"#)
            )
        )
        #expect(second.headerFields[.authorization]?.contains(#"nonce="2""#) == true)
        #expect(second.headerFields[.authorization]?.contains("nc=00000001") == true)
        #expect(await counter.value == 1)
        // stale again with the same nonce is not progress: give up.
        #expect(
            await state.next(
                request: second,
                response: Self.unauthorized(#"Digest realm="r", nonce="2", qop=auth, stale=true"#)
            )
                == .giveUp(.credentialsRejected(user: "u"))
        )
    }

    @Test func unsupportedChallenges() async {
        var state = AuthenticationState(credentials: Credentials(user: "u", password: "p"))
        #expect(
            await state.next(
                request: Self.request,
                response: Self.unauthorized(#"Digest realm="r", nonce="n", algorithm=SHA-512-256"#)
            )
                == .giveUp(.unsupportedAlgorithm("SHA-512-256"))
        )
        #expect(
            await state.next(
                request: Self.request,
                response: Self.unauthorized(#"Digest realm="r", nonce="n", qop="auth-int""#)
            )
                == .giveUp(.unsupportedQOP("auth-int"))
        )
        #expect(
            await state.next(request: Self.request, response: Self.unauthorized("Negotiate abc==", "Bearer"))
                == .giveUp(.unsupportedScheme(["negotiate", "bearer"]))
        )
        #expect(
            await state.next(request: Self.request, response: HTTPResponse(status: .unauthorized))
                == .giveUp(.noChallenge)
        )
    }

    @Test func unknownDigestFallsBackToBasic() async throws {
        var state = AuthenticationState(credentials: Credentials(user: "Aladdin", password: "open sesame"))
        let retry = try Self.retried(
            await state.next(
                request: Self.request,
                response: Self.unauthorized(#"Digest realm="r", nonce="n", algorithm=SHA-512-256, Basic realm="r""#)
            )
        )
        #expect(retry.headerFields[.authorization] == "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==")
    }

    @Test func preemptiveBasicIsOptIn() {
        var off = AuthenticationState(credentials: Credentials(user: "Aladdin", password: "open sesame"))
        #expect(off.authorize(Self.request).headerFields[.authorization] == nil)
        var on = AuthenticationState(
            credentials: Credentials(user: "Aladdin", password: "open sesame"),
            preemptiveBasic: true
        )
        #expect(on.authorize(Self.request).headerFields[.authorization] == "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==")
    }

    @Test func retryReplacesExistingAuthorization() async throws {
        var state = AuthenticationState(credentials: Credentials(user: "Aladdin", password: "open sesame"))
        var request = Self.request
        request.headerFields[.authorization] = "Bearer stale-token"
        let retry = try Self.retried(await state.next(request: request, response: Self.unauthorized("Basic realm=x")))
        #expect(retry.headerFields[values: .authorization] == ["Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="])
    }
}

/// Counts provider calls across the async boundary.
private actor Counter {
    var value = 0
    func increment() { self.value += 1 }
}
