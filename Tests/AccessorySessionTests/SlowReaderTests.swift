import AccessoryClient
import AccessoryResponder
import AccessorySession
import AccessoryTestSupport
import AccessoryTransport
import NIOCore
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A responder that is slow to read an upload holds the host back (docs/framing.md §5): the
/// 250 ms stall rule counts only the time the responder is asking for bytes, so a frame cut in
/// two by the responder's own back-pressure is not taken for one a dead host left unfinished.
extension SessionIOSuites {
    @Suite("session layer: a responder slow to read")
    struct SlowReaderTests {
        /// 16 tries on one line: a 1 MiB upload in session frames to a handler that waits 400 ms
        /// before it reads the body, so the responder stops reading with part of a frame in hand
        /// for longer than the stall bound. Each upload is answered with its byte count, and a
        /// request after it within its bound, in the same session.
        @Test func uploadToAHandlerThatWaitsIsTakenWhole() async throws {
            let size = 1 << 20
            let responder = HTTPResponder { request in
                if request.head.path == "/upload" {
                    try await Task.sleep(for: .milliseconds(400))
                }
                var received = 0
                for try await part in request.body { received += part.readableBytes }
                return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "\(received)")))
            }
            let (host, device) = try SocketPairTransport.makeSocketPair()
            let server = Task { try await responder.serve(descriptor: device) }
            let client = AccessoryClient(transport: SessionTransport(wrapping: SharedLineEnd(descriptor: host)))
            do {
                for attempt in 1...16 {
                    let upload = AccessoryRequest(
                        method: .post,
                        path: "/upload",
                        body: .bytes(ByteBuffer(repeating: UInt8(attempt), count: size))
                    )
                    let (head, body) = try await client.data(upload, maxBodySize: 64)
                    #expect(head.status == .ok, "attempt \(attempt)")
                    #expect(String(buffer: body) == "\(size)", "attempt \(attempt)")
                    let started = ContinuousClock.now
                    let (next, _) = try await client.get("/next")
                    #expect(next.status == .ok, "attempt \(attempt)")
                    #expect(
                        ContinuousClock.now - started < TimeBounds.scaled(.seconds(1)),
                        "attempt \(attempt): \(ContinuousClock.now - started)"
                    )
                }
                // One session for all of it: no stall was taken for a damaged frame.
                #expect(client.link.openCount == 1)
                #expect(client.link.renewalCount == 0)
            } catch {
                await client.shutdown()
                server.cancel()
                close(host)
                throw error
            }
            await client.shutdown()
            server.cancel()
            close(host)
        }
    }
}
