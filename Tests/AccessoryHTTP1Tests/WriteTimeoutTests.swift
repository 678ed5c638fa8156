import AccessoryHTTP1
import AccessoryTestSupport
import AccessoryTransport
import NIOCore
import Testing

@Suite("A transport's write timeout")
struct WriteTimeoutTests {
    /// The transport ends the link because the device stopped reading: the exchange fails as a
    /// write timeout (not "the device closed the link"), with the transport's reason, at the
    /// time the transport gave up; and the next request is answered on a new stream. Before
    /// 2026-12-07 it read "the device closed the link before the response was complete
    /// (writing … timed out …)", code link-closed (the CLI's exit 69 instead of a timeout's 75).
    @Test func endsTheExchangeAsAWriteTimeoutThenTheNextIsAnswered() async throws {
        let device = ScriptedDevice([
            // Reads nothing for a while: the request stays in the pair's buffers.
            [.sleep(milliseconds: 1500)],
            [.readRequest, .respond { Reply.ok("ok " + $0.path) }],
        ])
        let transport = WatchdogTransport(inner: device.transport, after: .milliseconds(200))
        try await withLink(transport) { (link: HTTPLink) async throws in
            let started = ContinuousClock.now
            await #expect {
                _ = try await link.fetch(
                    "/first",
                    method: .post,
                    body: .bytes(ByteBuffer(string: "a body the device never reads"))
                )
            } throws: { error in
                guard let error = error as? HTTPLinkError else { return false }
                return error.code == .writeTimeout && error.isTransient
                    && error.message == WatchdogTransport.reason
                    && (error.underlying as? TransportError)?.code == .writeTimedOut
            }
            let took = ContinuousClock.now - started
            #expect(took < .milliseconds(200) + TimeBounds.scaled(.milliseconds(800)), "it failed after \(took)")
            // The next request, on a new stream.
            let next = ContinuousClock.now
            #expect(try await link.fetch("/second").body == "ok /second")
            #expect(ContinuousClock.now - next < TimeBounds.scaled(.seconds(1)))
            #expect(device.connectionCount == 2)
        }
    }
}
