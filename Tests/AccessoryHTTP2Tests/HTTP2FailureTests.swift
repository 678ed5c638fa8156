import AccessoryClient
import AccessoryHTTP1
import AccessoryResponder
import AccessoryTransport
import NIOCore
import NIOPosix
import Testing

/// A stream that fails while its body is read reaches the caller as the client's own error
/// (it reached callers as a raw swift-nio-http2 error), and the link answers the next request.
@Suite("HTTP/2 failures mid-body", .timeLimit(.minutes(1)))
struct HTTP2FailureTests {
    struct BrokenBody: Error {}

    @Test func aStreamResetMidBodyIsALinkErrorAndTheNextIsAnswered() async throws {
        let responder = HTTPResponder { request in
            guard request.head.path == "/broken" else {
                return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "fine")))
            }
            return ResponderResponse(
                status: .ok,
                body: .stream(length: nil) { writer in
                    try await writer.write(ByteBuffer(repeating: 0x42, count: 100_000))
                    throw BrokenBody()  // the responder resets the stream
                }
            )
        }
        let group = MultiThreadedEventLoopGroup.singleton
        let transport = SocketPairTransport(name: "broken-body responder") { descriptor in
            let eventLoop = group.next()
            Task { try? await responder.serve(descriptor: descriptor, on: eventLoop) }
        }
        var configuration = AccessoryClient.Configuration()
        configuration.link.httpVersion = .http2
        let client = AccessoryClient(transport: transport, configuration: configuration)
        for attempt in 1...16 {
            do {
                _ = try await client.get("/broken")
                Issue.record("attempt \(attempt): a body the device broke off was delivered as a success")
            } catch {
                #expect(error.code == .transportFailed, "attempt \(attempt): \(error)")
                #expect(
                    error.underlying is HTTPLinkError,
                    "attempt \(attempt): \(String(reflecting: error.underlying))"
                )
            }
            let (head, body) = try await client.get("/fine")
            #expect(head.status == .ok && String(buffer: body) == "fine", "attempt \(attempt)")
        }
        #expect(client.http2?.openCount == 1)
        await client.shutdown()
    }
}
