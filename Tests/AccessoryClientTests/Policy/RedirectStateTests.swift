import HTTPTypes
import Testing

@testable import AccessoryClient

@Suite struct RedirectStateTests {
    static func request(
        _ path: String,
        method: HTTPRequest.Method = .get,
        scheme: String? = nil,
        authority: String = "accessory"
    )
        -> HTTPRequest
    {
        HTTPRequest(method: method, scheme: scheme, authority: authority, path: path)
    }

    static func redirect(_ status: Int, to location: String?) -> HTTPResponse {
        var response = HTTPResponse(status: .init(code: status))
        if let location { response.headerFields[.location] = location }
        return response
    }

    struct Followed {
        var request: HTTPRequest
        var dropBody: Bool
        var needsBodyReplay: Bool
    }

    static func followed(_ decision: RedirectDecision) throws -> Followed {
        guard case .follow(let request, let dropBody, let needsBodyReplay) = decision else {
            Issue.record("expected follow, got \(decision)")
            throw CancellationError()
        }
        return Followed(request: request, dropBody: dropBody, needsBodyReplay: needsBodyReplay)
    }

    @Test(arguments: [200, 300, 304, 305, 306, 401, 404])
    func notFollowedStatuses(status: Int) {
        let start = Self.request("/a")
        var state = RedirectState(policy: .default, initialRequest: start)
        #expect(state.next(request: start, response: Self.redirect(status, to: "/b"), hadBody: false) == .done)
    }

    @Test func missingLocationIsDone() {
        let start = Self.request("/a")
        var state = RedirectState(policy: .default, initialRequest: start)
        #expect(state.next(request: start, response: Self.redirect(302, to: nil), hadBody: false) == .done)
        #expect(state.next(request: start, response: Self.redirect(302, to: "  "), hadBody: false) == .done)
    }

    @Test func policyNoneReturnsTheRedirect() {
        let start = Self.request("/a")
        var state = RedirectState(policy: .none, initialRequest: start)
        #expect(state.next(request: start, response: Self.redirect(302, to: "/b"), hadBody: false) == .done)
    }

    @Test(arguments: [301, 302])
    func postBecomesGetOn301And302(status: Int) throws {
        var start = Self.request("/form", method: .post)
        start.headerFields[.contentType] = "application/json"
        start.headerFields[.contentLength] = "2"
        start.headerFields[.transferEncoding] = "chunked"
        start.headerFields[.accept] = "*/*"
        var state = RedirectState(policy: .default, initialRequest: start)
        let next = try Self.followed(
            state.next(request: start, response: Self.redirect(status, to: "/done"), hadBody: true)
        )
        #expect(next.request.method == .get)
        #expect(next.request.path == "/done")
        #expect(next.dropBody && !next.needsBodyReplay)
        #expect(next.request.headerFields[.contentType] == nil)
        #expect(next.request.headerFields[.contentLength] == nil)
        #expect(next.request.headerFields[.transferEncoding] == nil)
        #expect(next.request.headerFields[.accept] == "*/*")
    }

    @Test func putKeepsMethodAndBodyOn301() throws {
        let start = Self.request("/a", method: .put)
        var state = RedirectState(policy: .default, initialRequest: start)
        let next = try Self.followed(state.next(request: start, response: Self.redirect(301, to: "/b"), hadBody: true))
        #expect(next.request.method == .put)
        #expect(!next.dropBody && next.needsBodyReplay)
    }

    @Test func seeOtherFromPostBecomesGet() throws {
        var start = Self.request("/form", method: .post)
        start.headerFields[.contentLength] = "5"
        var state = RedirectState(policy: .default, initialRequest: start)
        // Pointing at its own URL is the usual post/redirect/get pattern, not a cycle.
        let next = try Self.followed(
            state.next(request: start, response: Self.redirect(303, to: "/form"), hadBody: true)
        )
        #expect(next.request.method == .get)
        #expect(next.request.path == "/form")
        #expect(next.dropBody && !next.needsBodyReplay)
        #expect(next.request.headerFields[.contentLength] == nil)
    }

    @Test func seeOtherKeepsHead() throws {
        let start = Self.request("/a", method: .head)
        var state = RedirectState(policy: .default, initialRequest: start)
        let next = try Self.followed(state.next(request: start, response: Self.redirect(303, to: "/b"), hadBody: false))
        #expect(next.request.method == .head)
    }

    @Test(arguments: [307, 308])
    func temporaryAndPermanentKeepPost(status: Int) throws {
        var start = Self.request("/upload", method: .post)
        start.headerFields[.contentLength] = "5"
        var state = RedirectState(policy: .default, initialRequest: start)
        let next = try Self.followed(
            state.next(request: start, response: Self.redirect(status, to: "/upload2"), hadBody: true)
        )
        #expect(next.request.method == .post)
        #expect(next.request.headerFields[.contentLength] == "5")
        #expect(!next.dropBody && next.needsBodyReplay)
        // Without a body nothing needs replaying.
        var bodiless = RedirectState(policy: .default, initialRequest: start)
        let plain = try Self.followed(
            bodiless.next(request: start, response: Self.redirect(status, to: "/x"), hadBody: false)
        )
        #expect(!plain.dropBody && !plain.needsBodyReplay)
    }

    @Test func limit() throws {
        var request = Self.request("/redirect/0")
        var state = RedirectState(policy: RedirectPolicy(maxRedirects: 3), initialRequest: request)
        for hop in 1...3 {
            let next = try Self.followed(
                state.next(request: request, response: Self.redirect(302, to: "/redirect/\(hop)"), hadBody: false)
            )
            request = next.request
        }
        #expect(state.redirectCount == 3)
        #expect(
            state.next(request: request, response: Self.redirect(302, to: "/redirect/4"), hadBody: false)
                == .fail(.tooManyRedirects(limit: 3))
        )
    }

    @Test func redirectChainIsNotACycle() throws {
        var request = Self.request("/redirect/5")
        var state = RedirectState(policy: .default, initialRequest: request)
        for remaining in (1...4).reversed() {
            request = try Self.followed(
                state.next(request: request, response: Self.redirect(302, to: "/redirect/\(remaining)"), hadBody: false)
            ).request
        }
        request = try Self.followed(
            state.next(request: request, response: Self.redirect(302, to: "/get"), hadBody: false)
        ).request
        #expect(request.path == "/get")
    }

    @Test func cycle() throws {
        let start = Self.request("/a")
        var state = RedirectState(policy: .default, initialRequest: start)
        let b = try Self.followed(state.next(request: start, response: Self.redirect(302, to: "/b"), hadBody: false))
            .request
        #expect(
            state.next(request: b, response: Self.redirect(302, to: "/a"), hadBody: false)
                == .fail(.cycle(url: "http://accessory/a"))
        )
        // A self-redirect is a cycle too.
        var selfState = RedirectState(policy: .default, initialRequest: start)
        #expect(
            selfState.next(request: start, response: Self.redirect(301, to: "http://ACCESSORY/a#frag"), hadBody: false)
                == .fail(.cycle(url: "http://accessory/a"))
        )
    }

    @Test func relativeLocations() throws {
        let cases: [(base: String, location: String, expected: String)] = [
            ("/dir/page?x=1", "other", "/dir/other"),
            ("/dir/page", "../up?q=2#top", "/up?q=2"),
            ("/dir/page", "?only=query", "/dir/page?only=query"),
            ("/dir/sub/page", "./here", "/dir/sub/here"),
            ("/dir/page", "/abs/path", "/abs/path"),
            ("/dir/page", "//accessory/net/path", "/net/path"),
            ("/dir/page", "http://accessory/abs#frag", "/abs"),
            ("/dir/page", "http://accessory", "/"),
            // Foundation percent-encodes what servers send unencoded, as browsers do.
            ("/dir/page", "a b", "/dir/a%20b"),
        ]
        for (base, location, expected) in cases {
            let start = Self.request(base)
            var state = RedirectState(policy: .default, initialRequest: start)
            let next = try Self.followed(
                state.next(request: start, response: Self.redirect(302, to: location), hadBody: false)
            )
            #expect(next.request.path == expected, "\(location) against \(base)")
            #expect(next.request.authority == "accessory")
            #expect(next.request.scheme == nil)
        }
    }

    @Test func sameAccessoryWithExplicitSchemes() throws {
        for scheme in ["http", "accessory"] {
            let start = Self.request("/a", scheme: scheme)
            var state = RedirectState(policy: .default, initialRequest: start)
            let next = try Self.followed(
                state.next(request: start, response: Self.redirect(302, to: "\(scheme)://Accessory/b"), hadBody: false)
            )
            #expect(next.request.scheme == scheme)
            #expect(next.request.path == "/b")
        }
        // Port 80 is http's default.
        let start = Self.request("/a", scheme: "http")
        var state = RedirectState(policy: .default, initialRequest: start)
        _ = try Self.followed(
            state.next(request: start, response: Self.redirect(302, to: "http://accessory:80/b"), hadBody: false)
        )
    }

    @Test(arguments: [
        "http://elsewhere/b", "https://accessory/b", "http://accessory:8080/b", "//other/b", "accessory://other/",
    ])
    func crossAccessoryRefused(location: String) {
        let start = Self.request("/a", scheme: "http")
        var state = RedirectState(policy: .default, initialRequest: start)
        #expect(
            state.next(request: start, response: Self.redirect(302, to: location), hadBody: false)
                == .fail(.crossAccessoryRefused(location: location))
        )
    }

    @Test func crossAccessoryAllowedStripsCredentials() throws {
        var start = Self.request("/a")
        start.headerFields[.authorization] = "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        start.headerFields[.cookie] = "session=1"
        start.headerFields[.accept] = "*/*"
        var state = RedirectState(policy: RedirectPolicy(allowCrossAccessory: true), initialRequest: start)
        let next = try Self.followed(
            state.next(request: start, response: Self.redirect(307, to: "http://other:81/b?c=d"), hadBody: false)
        )
        #expect(next.request.scheme == "http")
        #expect(next.request.authority == "other:81")
        #expect(next.request.path == "/b?c=d")
        #expect(next.request.headerFields[.authorization] == nil)
        #expect(next.request.headerFields[.cookie] == nil)
        #expect(next.request.headerFields[.accept] == "*/*")
    }

    @Test func sameAccessoryKeepsCredentials() throws {
        var start = Self.request("/a")
        start.headerFields[.authorization] = "Basic x"
        start.headerFields[.cookie] = "session=1"
        var state = RedirectState(policy: .default, initialRequest: start)
        let next = try Self.followed(state.next(request: start, response: Self.redirect(302, to: "/b"), hadBody: false))
        #expect(next.request.headerFields[.authorization] == "Basic x")
        #expect(next.request.headerFields[.cookie] == "session=1")
    }

    @Test(arguments: ["mailto:someone@example.com", "ftp://accessory/file", "http://[::1/x", "javascript:alert(1)"])
    func invalidLocation(location: String) {
        let start = Self.request("/a")
        var state = RedirectState(policy: RedirectPolicy(allowCrossAccessory: true), initialRequest: start)
        let decision = state.next(request: start, response: Self.redirect(302, to: location), hadBody: false)
        #expect(decision == .fail(.invalidLocation(location)))
    }
}
