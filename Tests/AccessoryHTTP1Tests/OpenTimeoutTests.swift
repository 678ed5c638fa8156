import AccessoryHTTP1
import AccessoryTestSupport
import AccessoryTransport
import HTTPTypes
import NIOCore
import Synchronization
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

/// A transport whose first `open` hangs like ``StuckTransport``'s; later ones open `inner`.
private struct StuckOnceTransport: ByteStreamTransport {
    let inner: SocketPairTransport
    let opens = OpenCount()
    var description: String { "stuck once" }

    final class OpenCount: Sendable {
        let value = Atomic<Int>(0)
    }

    func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        if self.opens.value.add(1, ordering: .relaxed).oldValue == 0 {
            try await Task.detached { try await Task.sleep(for: .seconds(3)) }.value
            throw TransportError(.openFailed, "gave up")
        }
        return try await self.inner.open(on: eventLoop, configure: configure)
    }
}

@Suite("Opening the link")
struct OpenTimeoutTests {
    /// A request's deadline covers the open it waits for, even when the open timeout is
    /// longer (a session handshake whose answer was lost once held a 2 s request for 3 s); the
    /// next request opens the link afresh and is answered.
    @Test("the request's deadline bounds the open; the next request is answered")
    func deadlineBoundsTheOpen() async throws {
        let device = ScriptedDevice([[.readRequest, .respond { Reply.ok("ok " + $0.path) }]])
        var configuration = LinkConfiguration()
        configuration.openTimeout = .seconds(10)
        let link = HTTPLink(transport: StuckOnceTransport(inner: device.transport), configuration: configuration)
        let started = ContinuousClock.now
        await #expect {
            try await link.execute(
                HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/"),
                deadline: .now + .milliseconds(300)
            ) { _ in () }
        } throws: { error in
            let error = error as? HTTPLinkError
            return error?.code == .exchangeTimeout && error?.message.contains("deadline passed while opening") == true
        }
        let elapsed = ContinuousClock.now - started
        #expect(elapsed < TimeBounds.scaled(.milliseconds(800)), "a 300 ms deadline ended the call after \(elapsed)")
        let next = ContinuousClock.now
        #expect(try await link.fetch("/next").body == "ok /next")
        #expect(ContinuousClock.now - next < TimeBounds.scaled(.seconds(1)))
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
