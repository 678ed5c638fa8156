import AccessoryCrypto
import HTTPTypes
import Testing

@testable import AccessoryClient

@Suite struct DigestAuthorizationTests {
    /// RFC 7616 §3.9.1.
    static let rfc7616Nonce = "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v"
    static let rfc7616CNonce = "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ"
    static let rfc7616Opaque = "FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS"
    static let mufasa = Credentials(user: "Mufasa", password: "Circle of Life")

    static func rfc7616Challenge(algorithm: String) throws -> DigestChallenge {
        let header = """
            Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=\(algorithm), \
            nonce="\(rfc7616Nonce)", opaque="\(rfc7616Opaque)"
            """
        let parsed = try #require(AuthenticationChallenge.parse(header).first)
        return try DigestChallenge(parsed)
    }

    @Test func rfc7616SHA256() throws {
        let challenge = try Self.rfc7616Challenge(algorithm: "SHA-256")
        let response = try DigestAuthorization.response(
            challenge: challenge,
            credentials: Self.mufasa,
            method: "GET",
            uri: "/dir/index.html",
            nonceCount: 1,
            cnonce: Self.rfc7616CNonce
        )
        #expect(response == "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1")
        let value = try DigestAuthorization.value(
            challenge: challenge,
            credentials: Self.mufasa,
            method: "GET",
            uri: "/dir/index.html",
            nonceCount: 1,
            cnonce: Self.rfc7616CNonce
        )
        #expect(
            value == """
                Digest username="Mufasa", realm="http-auth@example.org", uri="/dir/index.html", \
                algorithm=SHA-256, nonce="\(Self.rfc7616Nonce)", nc=00000001, cnonce="\(Self.rfc7616CNonce)", \
                qop=auth, response="753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1", \
                opaque="\(Self.rfc7616Opaque)"
                """
        )
    }

    @Test func rfc7616MD5() throws {
        let challenge = try Self.rfc7616Challenge(algorithm: "MD5")
        let response = try DigestAuthorization.response(
            challenge: challenge,
            credentials: Self.mufasa,
            method: "GET",
            uri: "/dir/index.html",
            nonceCount: 1,
            cnonce: Self.rfc7616CNonce
        )
        #expect(response == "8ca523f5e9506fed4657c9700eebdbec")
    }

    /// RFC 2617 §3.5 (no algorithm parameter: MD5, and not echoed).
    @Test func rfc2617() throws {
        let header = """
            Digest realm="testrealm@host.com", qop="auth,auth-int", \
            nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093", opaque="5ccc069c403ebaf9f0171e9517f40e41"
            """
        let challenge = try DigestChallenge(try #require(AuthenticationChallenge.parse(header).first))
        let value = try DigestAuthorization.value(
            challenge: challenge,
            credentials: Credentials(user: "Mufasa", password: "Circle Of Life"),
            method: "GET",
            uri: "/dir/index.html",
            nonceCount: 1,
            cnonce: "0a4f113b"
        )
        #expect(
            value == """
                Digest username="Mufasa", realm="testrealm@host.com", uri="/dir/index.html", \
                nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093", nc=00000001, cnonce="0a4f113b", qop=auth, \
                response="6629fae49393a05397450978507c4ef1", opaque="5ccc069c403ebaf9f0171e9517f40e41"
                """
        )
    }

    /// RFC 2069: no qop means no nc/cnonce and response = H(HA1:nonce:HA2).
    @Test func rfc2069WithoutQOP() throws {
        let challenge = try DigestChallenge(
            AuthenticationChallenge(scheme: "Digest", parameters: ["realm": "r", "nonce": "n"])
        )
        #expect(!challenge.usesQOP)
        let value = try DigestAuthorization.value(
            challenge: challenge,
            credentials: Credentials(user: "u", password: "p"),
            method: "GET",
            uri: "/",
            nonceCount: 1,
            cnonce: "ignored"
        )
        let ha1 = Digest.hex(.md5, of: Array("u:r:p".utf8))
        let ha2 = Digest.hex(.md5, of: Array("GET:/".utf8))
        let expected = Digest.hex(.md5, of: Array("\(ha1):n:\(ha2)".utf8))
        #expect(value == "Digest username=\"u\", realm=\"r\", uri=\"/\", nonce=\"n\", response=\"\(expected)\"")
    }

    @Test func sessionAlgorithmHashesNonceIntoA1() throws {
        let challenge = try DigestChallenge(
            AuthenticationChallenge(
                scheme: "digest",
                parameters: ["realm": "r", "nonce": "n", "qop": "auth", "algorithm": "sha-256-SESS"]
            )
        )
        #expect(challenge.algorithm == .sha256Session)
        let response = try DigestAuthorization.response(
            challenge: challenge,
            credentials: Credentials(user: "u", password: "p"),
            method: "GET",
            uri: "/x",
            nonceCount: 2,
            cnonce: "c"
        )
        let ha1 = Digest.hex(.sha256, of: Array("\(Digest.hex(.sha256, of: Array("u:r:p".utf8))):n:c".utf8))
        let ha2 = Digest.hex(.sha256, of: Array("GET:/x".utf8))
        #expect(response == Digest.hex(.sha256, of: Array("\(ha1):n:00000002:c:auth:\(ha2)".utf8)))
    }

    /// RFC 7616 §3.4.4: username = H(user:realm), userhash=true echoed.
    @Test func userhash() throws {
        let challenge = try DigestChallenge(
            AuthenticationChallenge(
                scheme: "Digest",
                parameters: ["realm": "r", "nonce": "n", "qop": "auth", "algorithm": "SHA-256", "userhash": "TRUE"]
            )
        )
        let value = try DigestAuthorization.value(
            challenge: challenge,
            credentials: Credentials(user: "Mufasa", password: "p"),
            method: "GET",
            uri: "/",
            nonceCount: 1,
            cnonce: "c"
        )
        let hashed = Digest.hex(.sha256, of: Array("Mufasa:r".utf8))
        #expect(value.hasPrefix("Digest username=\"\(hashed)\", "))
        #expect(value.hasSuffix(", userhash=true"))
    }

    @Test func nonASCIIUserUsesExtendedNotation() throws {
        let challenge = try DigestChallenge(
            AuthenticationChallenge(scheme: "Digest", parameters: ["realm": "r", "nonce": "n"])
        )
        let value = try DigestAuthorization.value(
            challenge: challenge,
            credentials: Credentials(user: "Jäsøn Doe", password: "p"),
            method: "GET",
            uri: "/",
            nonceCount: 1,
            cnonce: "c"
        )
        #expect(value.hasPrefix("Digest username*=UTF-8''J%C3%A4s%C3%B8n%20Doe, "))
    }

    @Test func nonceCountIsEightHexDigits() {
        #expect(DigestAuthorization.nonceCountString(1) == "00000001")
        #expect(DigestAuthorization.nonceCountString(255) == "000000ff")
        #expect(DigestAuthorization.nonceCountString(.max) == "ffffffff")
    }

    @Test func challengeValidation() {
        #expect(throws: AuthenticationFailure.unsupportedAlgorithm("SHA-512-256")) {
            try DigestChallenge(
                AuthenticationChallenge(scheme: "Digest", parameters: ["nonce": "n", "algorithm": "SHA-512-256"])
            )
        }
        #expect(throws: AuthenticationFailure.unsupportedQOP("auth-int")) {
            try DigestChallenge(
                AuthenticationChallenge(scheme: "Digest", parameters: ["nonce": "n", "qop": "auth-int"])
            )
        }
        #expect(throws: AuthenticationFailure.malformedChallenge("Digest challenge without a nonce")) {
            try DigestChallenge(AuthenticationChallenge(scheme: "Digest", parameters: ["realm": "r"]))
        }
        #expect(AuthenticationFailure.unsupportedAlgorithm("SHA-512-256").description.contains("SHA-512-256"))
    }
}
