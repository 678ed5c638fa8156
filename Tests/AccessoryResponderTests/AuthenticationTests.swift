import AccessoryCrypto
import Foundation
import Testing

/// Basic and Digest authentication of the emulator, checked on the wire with credentials the
/// test computes itself from the RFC formulas.
@Suite(.timeLimit(.minutes(1)))
struct AuthenticationTests {
    @Test func basicAuthChallengesThenAccepts() async throws {
        try await LinkFixture.withLink { link in
            try await link.send("GET /basic-auth/user/pass HTTP/1.1\r\nHost: accessory\r\n\r\n")
            let challenge = try await link.readResponse()
            #expect(challenge.status == 401)
            #expect(challenge.header("www-authenticate") == "Basic realm=\"accessory\"")

            let wrong = Data("user:nope".utf8).base64EncodedString()
            try await link.send(
                "GET /basic-auth/user/pass HTTP/1.1\r\nHost: accessory\r\nAuthorization: Basic \(wrong)\r\n\r\n"
            )
            #expect(try await link.readResponse().status == 401)

            let right = Data("user:pass".utf8).base64EncodedString()
            try await link.send(
                "GET /basic-auth/user/pass HTTP/1.1\r\nHost: accessory\r\nAuthorization: Basic \(right)\r\n\r\n"
            )
            let accepted = try await link.readResponse()
            #expect(accepted.status == 200)
            let json = try JSONSerialization.jsonObject(with: Data(accepted.body)) as? [String: Any]
            #expect(json?["authenticated"] as? Bool == true)
            #expect(json?["user"] as? String == "user")
        }
    }

    @Test(arguments: [
        ("auth", "MD5"), ("auth", "SHA-256"), ("auth", "MD5-sess"), ("auth", "SHA-256-sess"), ("none", "MD5"),
    ])
    func digestAuthChallengesThenAccepts(qop: String, algorithmName: String) async throws {
        try await LinkFixture.withLink { link in
            let path =
                algorithmName == "MD5" && qop == "none"
                ? "/digest-auth/none/alice/s3cret" : "/digest-auth/\(qop)/alice/s3cret/\(algorithmName)"
            try await link.send("GET \(path) HTTP/1.1\r\nHost: accessory\r\n\r\n")
            let challenge = try await link.readResponse()
            #expect(challenge.status == 401)
            let header = try #require(challenge.header("www-authenticate"))
            #expect(header.hasPrefix("Digest realm=\"accessory\""))
            #expect(header.contains("algorithm=\(algorithmName)"))
            #expect(header.contains("qop=\"auth\"") == (qop == "auth"))
            let nonce = try #require(Self.parameter("nonce", in: header))
            let opaque = try #require(Self.parameter("opaque", in: header))

            let hash: Digest.Algorithm = algorithmName.hasPrefix("SHA-256") ? .sha256 : .md5
            func h(_ text: String) -> String { Digest.hex(hash, of: Array(text.utf8)) }
            let cnonce = "0a4f113b", nc = "00000001"
            var ha1 = h("alice:accessory:s3cret")
            if algorithmName.hasSuffix("-sess") { ha1 = h("\(ha1):\(nonce):\(cnonce)") }
            let ha2 = h("GET:\(path)")
            let response =
                qop == "auth" ? h("\(ha1):\(nonce):\(nc):\(cnonce):auth:\(ha2)") : h("\(ha1):\(nonce):\(ha2)")

            var authorization =
                "Digest username=\"alice\", realm=\"accessory\", nonce=\"\(nonce)\", uri=\"\(path)\", "
                + "algorithm=\(algorithmName), response=\"\(response)\", opaque=\"\(opaque)\""
            if qop == "auth" { authorization += ", qop=auth, nc=\(nc), cnonce=\"\(cnonce)\"" }

            let wrong = authorization.replacingOccurrences(
                of: response,
                with: String(repeating: "0", count: response.count)
            )
            try await link.send("GET \(path) HTTP/1.1\r\nHost: accessory\r\nAuthorization: \(wrong)\r\n\r\n")
            #expect(try await link.readResponse().status == 401)

            try await link.send("GET \(path) HTTP/1.1\r\nHost: accessory\r\nAuthorization: \(authorization)\r\n\r\n")
            let accepted = try await link.readResponse()
            #expect(accepted.status == 200)
            let json = try JSONSerialization.jsonObject(with: Data(accepted.body)) as? [String: Any]
            #expect(json?["authenticated"] as? Bool == true)
            #expect(json?["user"] as? String == "alice")
        }
    }

    /// A quoted parameter of a challenge.
    static func parameter(_ name: String, in header: String) -> String? {
        guard let start = header.range(of: "\(name)=\"") else { return nil }
        let rest = header[start.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { return nil }
        return String(rest[..<end])
    }
}
