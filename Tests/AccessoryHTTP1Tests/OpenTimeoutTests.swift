import AccessoryHTTP1
import AccessoryTestSupport
import AccessoryTransport
import HTTPTypes
import NIOCore
import Testing

/// A transport whose `open` never finishes and ignores cancellation, like a blocking open(2)
/// on a stuck tty.
private struct StuckTransport: ByteStreamTransport {
    var description: String { "stuck" }

    func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        // Deliberately not cancellable: sleeps in a detached task the caller cannot reach.
        try await Task.detached { try await Task.sleep(for: .seconds(3)) }.value
        throw TransportError(.openFailed, "gave up")
    }
}

/// A transport that gives up opening on a timeout of its own (a socket's connect timeout, a
/// phone that never comes back in accessory mode).
private struct TimingOutTransport: ByteStreamTransport {
    var description: String { "timing out" }

    func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        throw TransportError(.openTimedOut, "the device did not come back within 7 s")
    }
}

@Suite("Opening the link")
struct OpenTimeoutTests {
    /// The transport's own open timeout is the link's open timeout (the CLI's exit status 75),
    /// with the transport's message; any other transport error stays `transportFailed` (69).
    @Test("a transport's open timeout is reported as the link's")
    func transportOpenTimeout() async throws {
        let link = HTTPLink(transport: TimingOutTransport())
        await #expect {
            try await link.execute(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/")) { _ in () }
        } throws: { error in
            guard let error = error as? HTTPLinkError else { return false }
            return error.code == .openTimeout && error.message.contains("did not come back")
                && (error.underlying as? TransportError)?.code == .openTimedOut
        }
        await link.shutdown()
    }

    @Test("the open timeout bounds a transport that ignores cancellation")
    func openTimeout() async throws {
        var configuration = LinkConfiguration()
        configuration.openTimeout = .milliseconds(200)
        let link = HTTPLink(transport: StuckTransport(), configuration: configuration)
        let started = ContinuousClock.now
        await #expect {
            try await link.execute(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/")) { _ in () }
        } throws: { error in
            (error as? HTTPLinkError)?.code == .openTimeout
        }
        #expect(ContinuousClock.now - started < .seconds(2.5))  // the stuck open lasts 3 s
    }

    /// The caller's deadline ends the call while the link opens, and the open goes on for the
    /// next request, which is answered on it: the device sees one connection, not one given up
    /// and another. Before, the call waited out the whole open (1 s) past its 300 ms deadline.
    @Test("a deadline ends the call during the open, and the late open serves the next request")
    func deadlineDuringTheOpen() async throws {
        let device = ScriptedDevice([[.readRequest, .respond { Reply.ok("ok " + $0.path) }]])
        let transport = SlowOpeningTransport(inner: device.transport, delay: .seconds(1))
        var configuration = testConfiguration()
        configuration.openTimeout = .seconds(10)
        try await withLink(transport, configuration: configuration) { (link) async throws in
            let started = ContinuousClock.now
            let code = await linkErrorCode {
                _ = try await link.execute(
                    HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/first"),
                    deadline: .now + .milliseconds(300)
                ) { _ in () }
            }
            let ended = ContinuousClock.now - started
            #expect(code == .exchangeTimeout)
            #expect(ended < .milliseconds(300) + TimeBounds.scaled(.milliseconds(200)), "the call ended after \(ended)")
            #expect(try await link.fetch("/next").body == "ok /next")
            #expect(link.openCount == 1)
            #expect(device.connectionCount == 1)
            #expect(device.problems.isEmpty, "\(device.problems)")
        }
    }

    @Test("cancelling the caller while the link opens ends the wait at once")
    func cancelWhileOpening() async throws {
        let link = HTTPLink(transport: StuckTransport())
        let task = Task {
            try await link.execute(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/")) { _ in () }
        }
        try await Task.sleep(for: .milliseconds(100))
        let started = ContinuousClock.now
        task.cancel()
        let result = await task.result
        #expect(throws: HTTPLinkError.self) { try result.get() }
        #expect(ContinuousClock.now - started < .seconds(2.5))  // the stuck open lasts 3 s
    }
}
