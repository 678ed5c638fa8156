import AccessoryClient
import AccessoryHTTP1
import AccessoryResponder
import AccessoryTestSupport
import AccessoryTransport
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// The device's half of HTTP/2 back-pressure: a responder whose handler has not read an upload
/// yet takes only a little of it ahead. A host's idle bound starts when the last of the body is
/// taken, so what the device holds must drain within it (docs/protocol.md); the responder
/// announces 256 KiB per request stream (`HTTP2Windows.responderStream`) and credits a stream
/// only as its handler takes the body (`HTTP2ServerStreams`). Measured here since the responder's
/// streams are frames: 262 303-262 425 bytes left the host before the handler read (the window,
/// the frames' headers and the request's head), every try. Before, with swift-nio-http2's
/// stream channels: 384-513 KiB in a debug build, up to 691 KiB under AddressSanitizer (a stream
/// channel hands what it holds to the handler's queue on one read and tops the window up, and
/// raised the first stream's window target by the SETTINGS change: 448 KiB); and before the
/// window was 256 KiB, the whole 1 MiB the host's stream window let out, and 2 MiB and more
/// ahead of a handler that reads slowly (docs/performance.md).
@Suite("HTTP/2 back-pressure on the device", .timeLimit(.minutes(2)))
struct ResponderBackPressureTests {
    /// Whether `/gated` handlers may read their bodies yet.
    final class Gate: Sendable {
        private let isOpen = Atomic(false)
        func open() { self.isOpen.store(true, ordering: .releasing) }
        func close() { self.isOpen.store(false, ordering: .releasing) }
        func wait() async throws {
            while !self.isOpen.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(5)) }
        }
    }

    /// 4 MiB, 16 tries; under a sanitizer 2 MiB (still four times the window), 4 tries: what is
    /// measured is flow control, which a sanitizer does not change, and 16 tries of 4 MiB took
    /// 87 s there.
    static let uploadSize = TimeBounds.sanitized ? 2 << 20 : 4 << 20
    static let tries = TimeBounds.sanitized ? 4 : 16

    /// `/gated` reads nothing of the body until the gate opens, then reads all of it and answers
    /// with the byte count; anything else is answered `fine` at once.
    static func responder(_ gate: Gate) -> HTTPResponder {
        HTTPResponder { request in
            guard request.head.path == "/gated" else {
                return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "fine")))
            }
            try await gate.wait()
            var received = 0
            for try await part in request.body { received += part.readableBytes }
            return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "\(received)")))
        }
    }

    /// How long the bytes sent must stand still to count as held back (longer under a sanitizer,
    /// where a busy sender can pause that long with the window open).
    static let stillFor: Duration = TimeBounds.sanitized ? .seconds(1) : .milliseconds(300)

    /// Waits until `counter` has not moved for ``stillFor``; returns its value then.
    static func settled(_ counter: ByteCounter) async throws -> Int {
        var last = counter.value
        var stillSince = ContinuousClock.now
        while ContinuousClock.now - stillSince < Self.stillFor {
            try await Task.sleep(for: .milliseconds(20))
            let now = counter.value
            if now != last { (last, stillSince) = (now, ContinuousClock.now) }
        }
        return last
    }

    /// 16 tries on one link (``tries``), each a 4 MiB streamed upload (``uploadSize``) to a
    /// handler that has not read it: the bytes that left the host (HTTP/2 frames, so the body,
    /// 9 bytes a frame and the request's head) stay under 1 MiB; then the gate opens, the
    /// whole body is counted, and the next request is answered.
    @Test func anUnreadUploadIsHeldBackByTheStreamWindow() async throws {
        let gate = Gate()
        let sent = ByteCounter()
        let group = MultiThreadedEventLoopGroup.singleton
        let responder = Self.responder(gate)
        let transport = ByteCountingTransport(
            inner: SocketPairTransport(name: "gated responder") { descriptor in
                let eventLoop = group.next()
                Task { try? await responder.serve(descriptor: descriptor, on: eventLoop) }
            },
            counter: sent,
            direction: .outbound
        )
        var configuration = AccessoryClient.Configuration()
        configuration.link.httpVersion = .http2
        let client = AccessoryClient(transport: transport, configuration: configuration)
        var aheads: [Int] = []
        for attempt in 0..<Self.tries {
            gate.close()
            let before = sent.value
            var request = try AccessoryRequest(method: .post, url: "/gated")
            request.body = .stream(length: Self.uploadSize) { writer in
                let piece = ByteBuffer(repeating: 0x5A, count: 64 << 10)
                for _ in 0..<(Self.uploadSize / piece.readableBytes) { try await writer.write(piece) }
            }
            let upload = Task { try await client.data(request) }
            let ahead = try await Self.settled(sent) - before
            aheads.append(ahead)
            #expect(ahead >= 256 << 10, "try \(attempt): only \(ahead) bytes left before the handler read")
            // The window, and a little for the frames' headers and the request's head.
            #expect(ahead < (256 + 16) << 10, "try \(attempt): \(ahead) bytes left before the handler read")
            gate.open()
            let (head, body) = try await upload.value
            #expect(head.status == .ok && String(buffer: body) == "\(Self.uploadSize)", "try \(attempt)")
            let (next, fine) = try await client.get("/fine")
            #expect(next.status == .ok && String(buffer: fine) == "fine", "try \(attempt)")
        }
        print(
            "responder back-pressure: bytes ahead of an unread \(Self.uploadSize >> 20) MiB upload, \(Self.tries) tries: "
                + "\(aheads.min() ?? 0)-\(aheads.max() ?? 0)"
        )
        #expect(client.http2?.openCount == 1)
        await client.shutdown()
    }
}
