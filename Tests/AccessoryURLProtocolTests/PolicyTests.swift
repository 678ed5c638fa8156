import AccessoryURLProtocol
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("Redirects, authentication and timeouts through URLSession")
struct PolicyTests {
    @Test("redirects are followed inside the protocol and only the final response is delivered")
    func redirects() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(from: try Fixture.url("accessory://emu0/redirect/3"))
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 200)
        #expect(http.url?.absoluteString == "accessory://emu0/status")
        #expect(try json(data)["model"] as? String == "AH-EMU-1")
    }

    @Test("a redirect chain longer than the policy allows fails with httpTooManyRedirects")
    func tooManyRedirects() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        await #expect {
            _ = try await session.data(from: try Fixture.url("accessory://emu1/redirect/12"))
        } throws: { error in
            (error as? URLError)?.code == .httpTooManyRedirects
        }
    }

    @Test("Basic credentials from the URL's user information are used")
    func basicFromURL() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let (_, response) = try await session.data(
            from: try Fixture.url("accessory://bob:s%3Acret@emu2/basic-auth/bob/s:cret")
        )
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
    }

    @Test("Digest credentials come from the route's credential provider")
    func digestFromProvider() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let (_, response) = try await session.data(
            from: try Fixture.url("accessory://provided/digest-auth/auth/ann/pw")
        )
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
    }

    @Test(
        "a 401 without credentials is delivered as is, never to the session's challenge flow",
        arguments: ["accessory://emu3/basic-auth/u/p", "http://emu-http.test/digest-auth/auth/u/p"]
    )
    func unauthorized(url: String) async throws {
        let delegate = RecordingDelegate()
        let session = Fixture.session(delegate: delegate)
        defer { session.finishTasksAndInvalidate() }
        session.dataTask(with: try Fixture.url(url)).resume()
        let (response, _, error) = await delegate.completion()
        #expect(error == nil)
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 401)
        #expect(http.value(forHTTPHeaderField: "WWW-Authenticate") == nil)
        #expect(http.value(forHTTPHeaderField: "X-Accessory-WWW-Authenticate") != nil)
    }

    @Test("request.timeoutInterval ends a silent exchange with URLError.timedOut")
    func requestTimeout() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        var request = URLRequest(url: try Fixture.url("accessory://emu1/delay/3"))
        request.timeoutInterval = 0.3
        let started = ContinuousClock.now
        await #expect { _ = try await session.data(for: request) } throws: { ($0 as? URLError)?.code == .timedOut }
        #expect(ContinuousClock.now - started < .seconds(2))
    }

    @Test(
        "timeoutIntervalForRequest and timeoutIntervalForResource are enforced",
        arguments: [true, false]
    )
    func configurationTimeouts(resource: Bool) async throws {
        let session = Fixture.session { configuration in
            if resource {
                configuration.timeoutIntervalForResource = 0.4
            } else {
                configuration.timeoutIntervalForRequest = 0.3
            }
        }
        defer { session.finishTasksAndInvalidate() }
        let started = ContinuousClock.now
        await #expect { _ = try await session.data(from: try Fixture.url("accessory://emu2/delay/3")) } throws: {
            ($0 as? URLError)?.code == .timedOut
        }
        #expect(ContinuousClock.now - started < .seconds(2))
    }

    @Test("a slow but steady response is not cut by the idle timeout")
    func slowButSteady() async throws {
        let session = Fixture.session { $0.timeoutIntervalForRequest = 2 }
        defer { session.finishTasksAndInvalidate() }
        let (data, _) = try await session.data(from: try Fixture.url("accessory://emu3/delay/0.5"))
        #expect(try json(data)["delay"] as? Double == 0.5)
    }
}
