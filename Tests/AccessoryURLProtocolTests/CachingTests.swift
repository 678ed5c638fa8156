import Foundation
import Testing

@testable import AccessoryURLProtocol

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("Caching done by the protocol", .serialized)
struct CachingTests {
    private func heads(matching marker: String) -> [String] {
        Fixture.tracedHeads.withLock { $0.filter { $0.contains(marker) } }
    }

    @Test("a fresh cached response is served without asking the accessory")
    func freshHit() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let marker = "fresh-\(UUID().uuidString)"
        let url = try Fixture.url("accessory://traced/etag?m=\(marker)")
        let (first, _) = try await session.data(from: url)
        let (second, response) = try await session.data(from: url)
        #expect(first == second)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(self.heads(matching: marker).count == 1)
    }

    @Test(
        "max-age is delta-seconds: digits only, at most 2^31",
        arguments: [
            ("60", 60.0), ("0", 0), ("99999999999999", 2_147_483_648), ("inf", nil), ("1e300", nil), ("-5", nil),
            ("0x10", nil), ("1.5", nil), ("", nil), (" 60", nil),
        ] as [(String, Double?)]
    )
    func maxAgeIsDeltaSeconds(text: String, seconds: Double?) {
        #expect(ResponseCache.deltaSeconds(Substring(text)) == seconds)
    }

    @Test("the cache key includes the query string")
    func queryInKey() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let marker = "query-\(UUID().uuidString)"
        _ = try await session.data(from: try Fixture.url("accessory://traced/etag?m=\(marker)&a=1"))
        _ = try await session.data(from: try Fixture.url("accessory://traced/etag?m=\(marker)&a=2"))
        #expect(self.heads(matching: marker).count == 2)
    }

    @Test("reloadRevalidatingCacheData revalidates with If-None-Match; a 304 delivers the cached response")
    func revalidation() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let marker = "reval-\(UUID().uuidString)"
        let url = try Fixture.url("accessory://traced/etag?m=\(marker)")
        let (first, _) = try await session.data(from: url)
        var request = URLRequest(url: url)
        request.cachePolicy = .reloadRevalidatingCacheData
        let (second, response) = try await session.data(for: request)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(second == first)
        let heads = self.heads(matching: marker)
        #expect(heads.count == 2)
        #expect(heads.last?.lowercased().contains("if-none-match: \"emu-etag-1\"") == true)
        #expect(heads.last?.lowercased().contains("if-modified-since:") == true)
    }

    @Test("reloadIgnoringLocalCacheData always asks the accessory")
    func reload() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let marker = "reload-\(UUID().uuidString)"
        let url = try Fixture.url("accessory://traced/etag?m=\(marker)")
        _ = try await session.data(from: url)
        var request = URLRequest(url: url)
        request.cachePolicy = .reloadIgnoringLocalCacheData
        _ = try await session.data(for: request)
        #expect(self.heads(matching: marker).count == 2)
    }

    @Test(
        "returnCacheDataDontLoad fails with resourceUnavailable when nothing is cached, and serves the cache otherwise"
    )
    func dontLoad() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let marker = "dontload-\(UUID().uuidString)"
        let url = try Fixture.url("accessory://traced/etag?m=\(marker)")
        var request = URLRequest(url: url)
        request.cachePolicy = .returnCacheDataDontLoad
        await #expect { _ = try await session.data(for: request) } throws: {
            ($0 as? URLError)?.code == .resourceUnavailable
        }
        #expect(self.heads(matching: marker).isEmpty)
        _ = try await session.data(from: url)
        let (_, response) = try await session.data(for: request)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(self.heads(matching: marker).count == 1)
    }

    @Test("returnCacheDataElseLoad loads once, then serves the cache")
    func elseLoad() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let marker = "elseload-\(UUID().uuidString)"
        var request = URLRequest(url: try Fixture.url("accessory://traced/echo?m=\(marker)"))
        request.cachePolicy = .returnCacheDataElseLoad
        let (first, _) = try await session.data(for: request)
        let (second, _) = try await session.data(for: request)
        #expect(first == second)
        #expect(self.heads(matching: marker).count == 1)
    }

    @Test("a body streamed to a data delegate is still stored when it fits the cache")
    func delegateBodyStored() async throws {
        let delegate = RecordingDelegate()
        let streaming = Fixture.session(delegate: delegate)
        let plain = Fixture.session()
        defer {
            streaming.finishTasksAndInvalidate()
            plain.finishTasksAndInvalidate()
        }
        let marker = "delegate-\(UUID().uuidString)"
        let url = try Fixture.url("accessory://traced/echo?m=\(marker)")
        streaming.dataTask(with: url).resume()
        let (_, chunks, error) = await delegate.completion()
        #expect(error == nil)
        var cachedOnly = URLRequest(url: url)
        cachedOnly.cachePolicy = .returnCacheDataDontLoad
        let (data, _) = try await plain.data(for: cachedOnly)
        #expect(data == chunks.reduce(Data(), +))
        #expect(self.heads(matching: marker).count == 1)
    }

    @Test("a request with Cache-Control: no-store is not stored")
    func noStore() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let marker = "nostore-\(UUID().uuidString)"
        let url = try Fixture.url("accessory://traced/etag?m=\(marker)")
        var request = URLRequest(url: url)
        request.setValue("no-store", forHTTPHeaderField: "Cache-Control")
        _ = try await session.data(for: request)
        var cachedOnly = URLRequest(url: url)
        cachedOnly.cachePolicy = .returnCacheDataDontLoad
        await #expect(throws: URLError.self) { _ = try await session.data(for: cachedOnly) }
    }

    @Test("storage policy follows CacheStoragePolicyForRequestAndResponse")
    func storagePolicy() throws {
        let url = try Fixture.url("accessory://emu0/x")
        let request = URLRequest(url: url)
        func response(_ status: Int, _ fields: [String: String] = [:]) throws -> HTTPURLResponse {
            try #require(HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: fields))
        }
        for status in [200, 203, 206, 301, 304, 404, 410] {
            #expect(CacheStoragePolicy.policy(for: request, response: try response(status), secure: false) == .allowed)
            #expect(
                CacheStoragePolicy.policy(for: request, response: try response(status), secure: true)
                    == .allowedInMemoryOnly
            )
        }
        for status in [201, 302, 307, 401, 500] {
            #expect(
                CacheStoragePolicy.policy(for: request, response: try response(status), secure: false) == .notAllowed
            )
        }
        #expect(
            CacheStoragePolicy.policy(
                for: request,
                response: try response(200, ["Cache-Control": "max-age=5, no-store"]),
                secure: false
            ) == .notAllowed
        )
        var noStoreRequest = request
        noStoreRequest.setValue("no-store", forHTTPHeaderField: "Cache-Control")
        #expect(
            CacheStoragePolicy.policy(for: noStoreRequest, response: try response(200), secure: false) == .notAllowed
        )
    }
}
