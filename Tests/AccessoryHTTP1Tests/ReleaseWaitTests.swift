import AccessoryHTTP1
import AccessoryTestSupport
import AccessoryTransport
import NIOCore
import Testing

/// A transport whose streams let go of the device `delay` after they close (a USB interface
/// released by the bridge's thread once its last transfer is back), and whose reopen waits
/// for that (`reopenWaitsForRelease`).
private struct SlowReleasingTransport: ByteStreamTransport {
    let inner: any ByteStreamTransport
    let delay: Duration
    var description: String { "slow-releasing \(self.inner)" }
    var reopenWaitsForRelease: Bool { true }

    func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        let stream = try await self.inner.open(on: eventLoop, configure: configure)
        let delay = self.delay
        return OpenedByteStream(
            channel: stream.channel,
            diagnostics: { await stream.diagnostics() },
            released: {
                await stream.waitUntilReleased()
                // Not cancellable, as a transfer the kernel still holds.
                try? await Task.detached { try await Task.sleep(for: delay) }.value
            }
        )
    }
}

@Suite("Opening the link after a slow release")
struct ReleaseWaitTests {
    /// The open timeout bounds the wait for the stream closed before to let go of the device:
    /// a reopen that would wait 2 s for it fails at the 300 ms open timeout and says what it
    /// waited for; once released, the next request is answered on a new stream. Before
    /// 2026-12-07 the wait came before the open timeout began: the reopen took the whole 2 s.
    @Test func theOpenTimeoutBoundsTheWaitForARelease() async throws {
        let device = ScriptedDevice([
            [.readRequest, .respond { Reply.ok("ok " + $0.path) }, .close],
            [.readRequest, .respond { Reply.ok("ok " + $0.path) }],
        ])
        let release = TimeBounds.scaled(.seconds(2))
        var configuration = testConfiguration()
        configuration.openTimeout = .milliseconds(300)
        let transport = SlowReleasingTransport(inner: device.transport, delay: release)
        try await withLink(transport, configuration: configuration) { link in
            #expect(try await link.fetch("/first").body == "ok /first")
            // The device closes the stream after its answer; give the link a moment to see it.
            try await Task.sleep(for: .milliseconds(200))
            let started = ContinuousClock.now
            await #expect {
                _ = try await link.fetch("/second")
            } throws: { error in
                guard let error = error as? HTTPLinkError else { return false }
                return error.code == .openTimeout && error.message.contains("had not yet let go of the device")
            }
            let took = ContinuousClock.now - started
            #expect(
                // Well under the release's 2 s: the old code waited all of it.
                took < .milliseconds(300) + TimeBounds.scaled(.milliseconds(900)),
                "the reopen failed after \(took)"
            )
            // The next request, once the device is let go, is answered on a new stream.
            try await Task.sleep(for: release)
            #expect(try await link.fetch("/third").body == "ok /third")
            #expect(device.connectionCount == 2)
        }
    }
}
