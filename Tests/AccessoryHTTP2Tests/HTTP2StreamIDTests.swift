import AccessoryEmulator
import AccessoryHTTP1
import AccessoryHTTP2
import AccessoryTestSupport
import AccessoryTransport
import HTTPTypes
import NIOCore
import NIOPosix
import Testing

/// A connection's stream IDs end at 2^31 - 1 (RFC 9113 §5.1.1): a long-lived link (the bridge
/// answers for days) must then move to a new connection without failing a request, and without
/// cutting off the exchanges still running on the old one.
@Suite("HTTP/2 stream IDs", .timeLimit(.minutes(1)))
struct HTTP2StreamIDTests {
    func link(firstStreamID: Int32) -> HTTP2Link {
        HTTP2Link(
            transport: EmulatedAccessory().socketPairTransport(on: MultiThreadedEventLoopGroup.singleton),
            configuration: LinkConfiguration(),
            eventLoop: MultiThreadedEventLoopGroup.singleton.next(),
            firstStreamID: firstStreamID
        )
    }

    func get(_ link: HTTP2Link, _ path: String) async throws -> (HTTPResponse.Status, String) {
        try await link.execute(HTTPRequest(method: .get, scheme: nil, authority: nil, path: path)) { response in
            (response.head.status, String(buffer: try await response.body.collect(upTo: 1 << 20)))
        }
    }

    @Test func theLastStreamIDMovesTheLinkToANewConnection() async throws {
        // Three IDs are left: 2^31 - 5, 2^31 - 3 and 2^31 - 1.
        let link = self.link(firstStreamID: Int32.max - 4)
        for round in 0..<8 {
            let (status, body) = try await self.get(link, "/status")
            #expect(status == .ok, "request \(round)")
            #expect(body.contains("\"serialNumber\""), "request \(round)")
        }
        // Three requests per connection: 8 requests took three connections.
        #expect(link.openCount == 3)
        await link.shutdown()
    }

    @Test func anExchangeOnTheLastIDIsNotCutOffByTheNextConnection() async throws {
        let link = self.link(firstStreamID: Int32.max - 2)
        _ = try await self.get(link, "/status")  // 2^31 - 3
        // 2^31 - 1, the last ID: still running when the next request needs a new connection.
        async let slow = self.get(link, "/delay/1")
        try await Task.sleep(for: .milliseconds(200))
        let started = ContinuousClock.now
        let (status, _) = try await self.get(link, "/status")
        #expect(status == .ok)
        #expect(ContinuousClock.now - started < TimeBounds.scaled(.milliseconds(500)))
        let (slowStatus, _) = try await slow
        #expect(slowStatus == .ok, "the exchange on the old connection was answered")
        #expect(link.openCount == 2)
        await link.shutdown()
    }
}
