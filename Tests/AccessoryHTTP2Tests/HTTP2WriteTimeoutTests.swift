import AccessoryClient
import AccessoryHTTP1
import AccessoryResponder
import AccessoryTestSupport
import AccessoryTransport
import NIOCore
import NIOPosix
import Testing

/// When the transport itself ends an HTTP/2 connection because the device stopped taking bytes
/// (the USB bridge's write timeout), an exchange on it fails as that timeout, with the
/// transport's reason, as on an HTTP/1.1 link (WriteTimeoutTests there), and is not sent again.
/// Before 2026-12-07 it read "the HTTP/2 connection's stream ended …", code link-closed (the CLI's
/// exit 69 instead of a timeout's 75, the bridge's 502 instead of 504), or it was sent again on
/// a new connection.
@Suite("HTTP/2 and a transport's write timeout", .timeLimit(.minutes(1)))
struct HTTP2WriteTimeoutTests {
    /// `/silent` waits before its head, `/stall` stops in the middle of its body.
    @Test(arguments: ["/silent", "/stall"])
    func anExchangeEndsAsAWriteTimeoutThenTheNextIsAnswered(path: String) async throws {
        let responder = stallingResponder()
        let group = MultiThreadedEventLoopGroup.singleton
        let line = SocketPairTransport(name: "stalling responder") { descriptor in
            let eventLoop = group.next()
            Task { try? await responder.serve(descriptor: descriptor, on: eventLoop) }
        }
        var configuration = AccessoryClient.Configuration()
        configuration.link.httpVersion = .http2
        let client = AccessoryClient(
            transport: WatchdogTransport(inner: line, after: .milliseconds(300)),
            configuration: configuration
        )
        let clock = ContinuousClock()
        let started = clock.now
        do {
            _ = try await client.get(path)
            Issue.record("\(path) was answered as a success")
        } catch {
            #expect(error.code == .timedOut, "\(path): \(error)")
            let linkError = error.underlying as? HTTPLinkError
            #expect(linkError?.code == .writeTimeout, "\(path): \(String(reflecting: error.underlying))")
            #expect(linkError?.message == WatchdogTransport.reason, "\(path): \(error)")
            #expect((linkError?.underlying as? TransportError)?.code == .writeTimedOut, "\(path): \(error)")
        }
        let took = clock.now - started
        #expect(took < .milliseconds(300) + TimeBounds.scaled(.milliseconds(800)), "\(path): it failed after \(took)")
        // Not sent again: the one connection the watchdog ended, then the next request's own.
        try await expectFineAtOnce(client, path)
        #expect(client.http2?.openCount == 2)
        await client.shutdown()
    }
}
