import HTTPTypes
import Testing

@testable import AccessoryClient

@Suite struct WWWAuthenticateParserTests {
    @Test func singleBasic() {
        #expect(
            AuthenticationChallenge.parse(#"Basic realm="WallyWorld""#)
                == [AuthenticationChallenge(scheme: "basic", parameters: ["realm": "WallyWorld"])]
        )
    }

    @Test func schemeAloneAndCaseInsensitivity() {
        let parsed = AuthenticationChallenge.parse("BASIC, DiGeSt REALM=x, NONCE = \"n\"")
        #expect(parsed.map(\.scheme) == ["basic", "digest"])
        #expect(parsed[1].parameters == ["realm": "x", "nonce": "n"])
        #expect(parsed[1].realm == "x")
    }

    /// RFC 9110 §11.6.1 example: two challenges, commas and escapes inside quotes.
    @Test func severalChallengesWithQuotedCommasAndEscapes() {
        let value = #"Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple, \\really""#
        let parsed = AuthenticationChallenge.parse(value)
        #expect(parsed.count == 2)
        #expect(parsed[0].scheme == "newauth")
        #expect(parsed[0].parameters == ["realm": "apps", "type": "1", "title": #"Login to "apps""#])
        #expect(parsed[1] == AuthenticationChallenge(scheme: "basic", parameters: ["realm": #"simple, \really"#]))
    }

    @Test func token68() {
        let parsed = AuthenticationChallenge.parse(#"Negotiate abc==, Bearer, Basic realm="r""#)
        #expect(parsed.count == 3)
        #expect(parsed[0] == AuthenticationChallenge(scheme: "negotiate", token68: "abc=="))
        #expect(parsed[1] == AuthenticationChallenge(scheme: "bearer"))
        #expect(parsed[2].realm == "r")
        #expect(AuthenticationChallenge.parse("Negotiate YII+/x==  ").first?.token68 == "YII+/x==")
    }

    @Test func fullDigestChallengeWithWhitespace() {
        let value = """
            Digest\trealm = "http-auth@example.org" ,qop="auth, auth-int",\talgorithm=SHA-256 , \
            nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v",opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS"
            """
        let parsed = AuthenticationChallenge.parse(value)
        #expect(parsed.count == 1)
        #expect(parsed.first?.parameters["qop"] == "auth, auth-int")
        #expect(parsed.first?.parameters["algorithm"] == "SHA-256")
        #expect(parsed.first?.parameters["opaque"] == "FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS")
    }

    @Test func unquotedBase64NonceIsAccepted() {
        #expect(
            AuthenticationChallenge.parse("Digest nonce=ab/c+d==, realm=r").first?.parameters == [
                "nonce": "ab/c+d==", "realm": "r",
            ]
        )
    }

    @Test func severalHeaderLines() {
        var fields = HTTPFields()
        fields.append(HTTPField(name: .wwwAuthenticate, value: #"Digest realm="a", nonce="1", algorithm=MD5"#))
        fields.append(
            HTTPField(
                name: .wwwAuthenticate,
                value: #"Digest realm="a", nonce="2", algorithm=SHA-256, Basic realm="a""#
            )
        )
        let parsed = AuthenticationChallenge.challenges(in: fields)
        #expect(parsed.map(\.scheme) == ["digest", "digest", "basic"])
        #expect(parsed.map { $0.parameters["nonce"] } == ["1", "2", nil])
    }

    @Test func duplicateParameterKeepsFirst() {
        #expect(AuthenticationChallenge.parse("Basic realm=a, REALM=b").first?.realm == "a")
    }

    @Test(arguments: [
        "", ",,,", "   ", "=", "\"", "Basic realm=\"unterminated", "Basic realm=", "Basic =x", "\"quoted\" Basic",
        "Basic\"x\", Digest nonce=n", "Digest realm=\"a\\", ", , Basic , ,", "Basic realm=a b c=d", "\u{0}\u{FF}ÿ",
        "Digest ===, ===, a=\"b\\\"", "a=b", "Basic realm=\"x\" junk, Digest nonce=1",
    ])
    func garbageNeverCrashes(value: String) {
        _ = AuthenticationChallenge.parse(value)
    }

    @Test func garbageYieldsWhatParsed() {
        #expect(AuthenticationChallenge.parse(#"Basic realm="unterminated"#).first?.realm == "unterminated")
        #expect(AuthenticationChallenge.parse(#""x" y, Basic realm=r"#).map(\.scheme) == ["basic"])
        let junk = AuthenticationChallenge.parse(#"Basic realm="x" junk, Digest nonce=1"#)
        #expect(junk.map(\.scheme) == ["basic", "digest"])
        #expect(junk.last?.parameters["nonce"] == "1")
        #expect(AuthenticationChallenge.parse(", , Basic , ,").map(\.scheme) == ["basic"])
    }
}
