import AccessoryClient
import AccessoryHTTP1
import AccessoryResponder
import AccessoryTestSupport
import AccessoryTransport
import NIOCore
import NIOPosix
import Testing

/// A client speaking HTTP/2 to `responder`, which serves each open of the link on its own
/// socketpair in this process; `configure` adjusts the link (timeouts, decompression).
func http2Client(
    of responder: HTTPResponder,
    name: String,
    configure: (inout LinkConfiguration) -> Void = { _ in }
) -> AccessoryClient {
    let group = MultiThreadedEventLoopGroup.singleton
    let transport = SocketPairTransport(name: name) { descriptor in
        let eventLoop = group.next()
        Task { try? await responder.serve(descriptor: descriptor, on: eventLoop) }
    }
    var configuration = AccessoryClient.Configuration()
    configuration.link.httpVersion = .http2
    configure(&configuration.link)
    return AccessoryClient(transport: transport, configuration: configuration)
}

/// A device that keeps callers waiting: `/silent` answers nothing for 20 s, `/stall` sends
/// 1 000 bytes of a 10 000-byte body and then nothing, `/sink` never reads the request body
/// (an upload is held by flow control); anything else is answered `fine` at once.
func stallingResponder() -> HTTPResponder {
    HTTPResponder { request in
        switch request.head.path {
        case "/silent", "/sink":
            try await Task.sleep(for: .seconds(20))
            return ResponderResponse(status: .ok)
        case "/stall":
            return ResponderResponse(
                status: .ok,
                body: .stream(length: 10_000) { writer in
                    try await writer.write(ByteBuffer(repeating: 0x42, count: 1000))
                    try await Task.sleep(for: .seconds(20))
                }
            )
        default:
            return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "fine")))
        }
    }
}

/// The next answer after a fault: `/fine` (answered `fine` by `stallingResponder()` and the
/// other test devices) within 500 ms, stretched under a sanitizer.
func expectFineAtOnce(_ client: AccessoryClient, _ label: String) async throws {
    let clock = ContinuousClock()
    let started = clock.now
    let (head, body) = try await client.get("/fine")
    #expect(head.status == .ok && String(buffer: body) == "fine", "\(label)")
    #expect(
        clock.now - started < TimeBounds.scaled(.milliseconds(500)),
        "\(label): the next took \(clock.now - started)"
    )
}
