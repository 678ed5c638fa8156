import AccessoryTransport
import Foundation
import Synchronization
import Testing

@testable import AccessoryURLProtocol

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// FoundationNetworking behaviours the protocol works around, asserted as they are today, so
/// that a toolchain whose Foundation changes them is noticed (and the workaround revisited).
///
/// Behaviours that crash the process are not exercised here (they would kill the test run):
/// `wasRedirectedTo` (fatalError), a delegate-based download task completed by a protocol
/// (force cast), a client call after `stopLoading` returned, and a 401 challenge answered with
/// `.useCredential` (replaces the protocol by libcurl). See URLSessionOnLinux.md (AccessoryURLProtocol.docc).
@Suite("FoundationNetworking behaviours worked around", .serialized)
struct FoundationBehaviourTests {
    private func probeSession(
        delegate: (any URLSessionDelegate)? = nil,
        _ configure: (URLSessionConfiguration) -> Void = { _ in }
    ) -> URLSession {
        let configuration = URLSessionConfiguration.default
        configuration.protocolClasses = [ProbeProtocol.self]
        configuration.urlCache = nil
        configure(configuration)
        return URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    @Test("a completion handler keeps only the last didLoad chunk (why whole bodies go in one piece)")
    func lastChunkOnly() async throws {
        let session = self.probeSession()
        defer { session.finishTasksAndInvalidate() }
        let (data, _, error) = await completionHandlerLoad(
            session,
            URLRequest(url: try Fixture.url("probe://two-chunks/"))
        )
        #expect(error == nil)
        #expect(data == Data("second".utf8))
    }

    @Test("a data delegate receives every didLoad chunk (why delegates can stream)")
    func delegateGetsAll() async throws {
        let delegate = RecordingDelegate()
        let session = self.probeSession(delegate: delegate)
        defer { session.finishTasksAndInvalidate() }
        session.dataTask(with: try Fixture.url("probe://two-chunks/")).resume()
        let (_, chunks, _) = await delegate.completion()
        #expect(chunks == [Data("first".utf8), Data("second".utf8)])
    }

    @Test("httpAdditionalHeaders are not applied to the request a protocol sees")
    func additionalHeadersNotApplied() async throws {
        let session = self.probeSession { $0.httpAdditionalHeaders = ["X-App": "demo"] }
        defer { session.finishTasksAndInvalidate() }
        let url = try Fixture.url("probe://record/\(UUID().uuidString)")
        _ = await completionHandlerLoad(session, URLRequest(url: url))
        let seen = try #require(ProbeProtocol.recorded(url))
        #expect(seen.value(forHTTPHeaderField: "X-App") == nil)
    }

    @Test("uploadTask(with:from:) reaches the protocol with no body at all")
    func uploadBodyMissing() async throws {
        let session = self.probeSession()
        defer { session.finishTasksAndInvalidate() }
        let url = try Fixture.url("probe://record/\(UUID().uuidString)")
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        _ = try await session.upload(for: request, from: Data("payload".utf8))
        let seen = try #require(ProbeProtocol.recorded(url))
        #expect(seen.httpBody == nil && seen.httpBodyStream == nil)
    }

    @Test("nothing is stored in the session's urlCache for a custom protocol")
    func nothingCached() async throws {
        let cache = URLCache(memoryCapacity: 1 << 20, diskCapacity: 0, diskPath: nil)
        let session = self.probeSession { $0.urlCache = cache }
        defer { session.finishTasksAndInvalidate() }
        let url = try Fixture.url("probe://record/\(UUID().uuidString)")
        _ = await completionHandlerLoad(session, URLRequest(url: url))
        try await Task.sleep(for: .milliseconds(100))
        #expect(cache.cachedResponse(for: URLRequest(url: url)) == nil)
    }

    @Test("no timeout fires for a custom protocol")
    func noTimeouts() async throws {
        let session = self.probeSession {
            $0.timeoutIntervalForRequest = 0.2
            $0.timeoutIntervalForResource = 0.2
        }
        defer { session.invalidateAndCancel() }
        var request = URLRequest(url: try Fixture.url("probe://hang/"))
        request.timeoutInterval = 0.2
        let finished = Atomic<Bool>(false)
        let task = session.dataTask(with: request) { _, _, _ in finished.store(true, ordering: .relaxed) }
        task.resume()
        try await Task.sleep(for: .milliseconds(800))
        let didFinish = finished.load(ordering: .relaxed)
        #expect(!didFinish)
        task.cancel()
    }

    @Test("suspend() then resume() calls stopLoading then startLoading again on the same object (the wake)")
    func wakeMechanism() async throws {
        let session = self.probeSession()
        defer { session.finishTasksAndInvalidate() }
        let url = try Fixture.url("probe://wake/\(UUID().uuidString)")
        let outcome = TrackedMutex<Data?>(nil)
        let task = session.dataTask(with: url) { data, _, _ in outcome.withLock { $0 = data } }
        task.resume()
        try await Task.sleep(for: .milliseconds(100))
        task.suspend()
        task.resume()
        for _ in 0..<100 where outcome.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(20)) }
        #expect(ProbeProtocol.calls(url) == ["start", "stop", "start"])
        #expect(outcome.withLock { $0 } == Data("woken".utf8))
    }

    @Test("the session, its configuration and each task's delivery kind can be read by reflection")
    func reflection() async throws {
        let delegate = RecordingDelegate()
        let withDelegate = self.probeSession(delegate: delegate) { $0.httpAdditionalHeaders = ["X-App": "demo"] }
        defer { withDelegate.invalidateAndCancel() }
        let delegated = withDelegate.dataTask(with: try Fixture.url("probe://hang/"))
        let handled = withDelegate.dataTask(with: try Fixture.url("probe://hang/")) { _, _, _ in }
        // The session registers a task on its work queue, asynchronously; the protocol reads
        // the registry from startLoading, which runs after that on the same queue.
        try await Task.sleep(for: .milliseconds(200))
        let session = try #require(SessionIntrospection.session(of: delegated))
        #expect(session === withDelegate)
        #expect(session.configuration.httpAdditionalHeaders?["X-App"] as? String == "demo")
        #expect(SessionIntrospection.delivery(of: delegated, in: session) == .delegate)
        #expect(SessionIntrospection.delivery(of: handled, in: session) == .completionHandler)
    }
}

/// A protocol for observing FoundationNetworking: `probe://two-chunks/` loads "first" then
/// "second"; `probe://record/…` records the request; `probe://hang/` never answers;
/// `probe://wake/…` answers on its second `startLoading`.
final class ProbeProtocol: URLProtocol {
    // Instances are only used on their task's work queue; the shared records are behind a Mutex.
    private static let requests = TrackedMutex<[URL: URLRequest]>([:])
    private static let callLog = TrackedMutex<[URL: [String]]>([:])
    private var starts = 0

    static func recorded(_ url: URL) -> URLRequest? { Self.requests.withLock { $0[url] } }
    static func calls(_ url: URL) -> [String] { Self.callLog.withLock { $0[url] ?? [] } }

    override class func canInit(with request: URLRequest) -> Bool { request.url?.scheme == "probe" }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        guard let url = self.request.url else { return }
        self.starts += 1
        Self.callLog.withLock { $0[url, default: []].append("start") }
        switch url.host {
        case "two-chunks":
            self.respond(["first", "second"])
        case "record":
            Self.requests.withLock { $0[url] = self.request }
            self.respond([], cacheable: true)
        case "wake":
            if self.starts == 2 { self.respond(["woken"]) }
        default:
            break
        }
    }

    override func stopLoading() {
        guard let url = self.request.url else { return }
        Self.callLog.withLock { $0[url, default: []].append("stop") }
    }

    private func respond(_ chunks: [String], cacheable: Bool = false) {
        guard let url = self.request.url,
            let response = HTTPURLResponse(
                url: url,
                statusCode: 200,
                httpVersion: "HTTP/1.1",
                headerFields: ["Cache-Control": "max-age=60"]
            )
        else { return }
        self.client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: cacheable ? .allowed : .notAllowed)
        for chunk in chunks { self.client?.urlProtocol(self, didLoad: Data(chunk.utf8)) }
        self.client?.urlProtocolDidFinishLoading(self)
    }
}
