import AccessoryHTTP1
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

@Suite("Opening the link")
struct OpenTimeoutTests {
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
