import AccessoryEmulator
import AccessoryResponder
import Testing

/// How a graceful shutdown ends a link on a socket: once the host has read everything, the
/// device ends its sending side and keeps reading (and dropping) until the host ends its own, a
/// lingering close. A host may still be writing about what it read last (an HTTP/2 host sends a
/// WINDOW_UPDATE for the last bytes of a download while it decodes them); until 2026-12-06 the
/// device closed as soon as the host had read everything, and such a write found the link
/// reset: the host's NIO channel closed on it before it had handed on the answer's end
/// (GracefulShutdownTests, HTTP/2 without a session, about once in 100 shutdowns).
@Suite(.timeLimit(.minutes(1)))
struct LingeringCloseTests {
    /// 16 times: the shutdown ends an idle link; the host sees the end of the device's output,
    /// then writes, and its link is still open 100 ms later (the device reads what it wrote, as
    /// a device that closed would not); the responder then finishes when the host closes.
    @Test func theHostMayStillWriteAfterTheDeviceEndedItsOutput() async throws {
        for attempt in 1...16 {
            let responder = EmulatedAccessory().makeResponder()
            try await LinkFixture.withLink(responder: responder) { link in
                try await link.send("GET /status HTTP/1.1\r\nHost: accessory\r\n\r\n")
                let response = try await link.readResponse()
                #expect(response.status == 200, "attempt \(attempt)")
                responder.shutdown.begin()
                #expect(try await link.peerClosesWithoutData(), "attempt \(attempt): the device's output ends")
                try await link.send(bytes: Array(repeating: 0, count: 13))
                try await Task.sleep(for: .milliseconds(100))
                #expect(link.isOpen, "attempt \(attempt): the host's write after the device's end reset the link")
            }
        }
    }
}
