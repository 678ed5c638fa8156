import AccessoryClient
import AccessorySession
import AccessoryTestSupport
import Testing

/// An HTTP/2 link over the session layer starts its next connection on a new session in band
/// when the session under it ends, as the HTTP/1.1 link does: no new child process, no tty or
/// USB interface opened again (before 2026-11-30 it closed the line and opened it again).
extension SessionIOSuites {
    @Suite("session layer: HTTP/2 restarts in band", .serialized)
    struct HTTP2RenewalTests {
        /// 16 times, over a socketpair and a pty: a bit flipped in the device's answer to a GET
        /// ends the session (its CRC); the GET, which got no response head, goes out again on
        /// the next session, started in band, and is answered within 1 s. The line is opened
        /// once for all of it.
        ///
        /// Both kinds of HTTP/2 link: frame-level streams, and the stream channels of a link that
        /// decodes compressed responses (URLSession's), whose GET was not sent again before
        /// 2026-11-30 (NIO's multiplexer does not hand a connection's error to its streams: they
        /// saw only their channel close).
        @Test(arguments: LineKind.allCases, [false, true])
        func aDamagedFrameRestartsTheSessionInBand(line kind: LineKind, decompress: Bool) async throws {
            let line = try SharedLine(kind)
            let plan = FaultPlan(rate: 0)
            var configuration = AccessoryClient.Configuration()
            configuration.link.httpVersion = .http2
            configuration.link.decompressResponses = decompress
            let client = AccessoryClient(
                transport: SessionTransport(wrapping: FaultyTransport(inner: line.transport, plan: plan)),
                configuration: configuration
            )
            var failure: (any Error)?
            do {
                let (first, _) = try await client.get("/status")
                #expect(first.status == .ok)
                for attempt in 1...16 {
                    plan.armOnce(.flipBit)
                    let started = ContinuousClock.now
                    let (head, body) = try await client.get("/status")
                    let elapsed = ContinuousClock.now - started
                    #expect(head.status == .ok, "attempt \(attempt)")
                    #expect(String(buffer: body).contains("model"), "attempt \(attempt)")
                    #expect(elapsed < TimeBounds.scaled(.seconds(1)), "attempt \(attempt): \(elapsed)")
                    #expect(client.http2?.renewalCount == attempt, "attempt \(attempt)")
                }
                #expect(plan.injected[.flipBit] == 16)
                #expect(client.http2?.openCount == 1)
            } catch {
                failure = error
            }
            await client.shutdown()
            if let failure { throw failure }
        }
    }
}
