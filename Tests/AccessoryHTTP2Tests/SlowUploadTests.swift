import AccessoryClient
import AccessoryHTTP1
import AccessoryResponder
import AccessoryTestSupport
import AccessoryTransport
import NIOCore
import Testing

/// A device that takes a large request body slowly is still making progress: the link's
/// `idleTimeout` bounds the device's silence, not the length of an upload. Before, the bound ran
/// from the request's start while the device was still taking the body: on HTTP/1.1 for every
/// upload, on HTTP/2 for one in memory (`.bytes`), and an upload that lasted longer than the
/// bound failed with `idle-timeout`; and on HTTP/2 a streamed upload the device stopped taking
/// waited for the caller's deadline, or forever.
///
/// The rule both link kinds keep: while the request is being written, each part the device takes
/// restarts the bound; once all of it is written (on HTTP/2: inside the device's flow-control
/// window), the device has the whole bound to begin its answer. A device that takes none of the
/// body for the bound ends the call with `idle-timeout`, and the next request is answered.
@Suite("Slow uploads and the idle bound", .timeLimit(.minutes(2)))
struct SlowUploadTests {
    /// The link's idle bound. Under AddressSanitizer the six cases at once are CPU-bound on two
    /// cores (4 MiB took about 8 s, 256 KiB writes left up to 0.9 s apart, and what the device
    /// held when the last byte left took about 1.4 s to drain, against 1.5 s), so the bound is
    /// longer there and the upload with it.
    static let idleTimeout: Duration = TimeBounds.sanitized ? .seconds(4) : .milliseconds(1500)
    /// Bytes per second the device takes the body at, at most: 4 MiB takes at least 2.6 s (8 MiB
    /// 5.2 s under a sanitizer), longer than the bound; what the device holds ahead (its 256 KiB
    /// stream window, handed over and topped up once, and the socket's buffer) drains well
    /// within it.
    static let deviceRate = 1_600_000
    static let uploadSize = TimeBounds.sanitized ? 8 << 20 : 4 << 20

    /// `/slow-sink` reads the body at ``deviceRate`` and answers with the byte count; `/sink`
    /// never reads it; anything else is answered `fine` at once.
    static func responder() -> HTTPResponder {
        HTTPResponder { request in
            switch request.head.path {
            case "/slow-sink":
                // Paced against the clock, not a sleep per part: under AddressSanitizer each
                // part's own cost slowed a sleep-per-part device to about a third of the rate,
                // and what it held when the last byte left then took longer than the bound.
                let clock = ContinuousClock()
                let started = clock.now
                var received = 0
                for try await part in request.body {
                    received += part.readableBytes
                    try await clock.sleep(until: started + .microseconds(received * 1_000_000 / Self.deviceRate))
                }
                return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "\(received)")))
            case "/sink":
                try await Task.sleep(for: .seconds(20))
                return ResponderResponse(status: .ok)
            default:
                return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "fine")))
            }
        }
    }

    /// `decompress`: the link URLSession's requests take (HTTP/2 stream channels with NIO's
    /// decompressor, not frame-level streams).
    static func client(_ version: LinkOptions.HTTPVersion, decompress: Bool = false) -> AccessoryClient {
        http2Client(of: Self.responder(), name: "slow upload responder") {
            $0.httpVersion = version
            $0.idleTimeout = Self.idleTimeout
            $0.decompressResponses = decompress
        }
    }

    /// After the upload, `/fine` is answered on the same client within `bound`.
    static func expectTheNextIsAnswered(_ client: AccessoryClient, within bound: Duration, _ label: String)
        async throws
    {
        let clock = ContinuousClock()
        let started = clock.now
        let (head, body) = try await client.get("/fine")
        #expect(head.status == .ok && String(buffer: body) == "fine", "\(label)")
        #expect(clock.now - started < bound, "\(label): the next took \(clock.now - started)")
    }

    /// The request body, in memory (`.bytes`) or streamed in 64 KiB parts.
    static func body(size: Int, streamed: Bool) -> HTTPRequestBody {
        guard streamed else { return .bytes(ByteBuffer(repeating: 0x5A, count: size)) }
        return .stream(length: size) { writer in
            let piece = ByteBuffer(repeating: 0x5A, count: 64 << 10)
            for _ in 0..<(size / piece.readableBytes) { try await writer.write(piece) }
        }
    }

    /// The link kinds: HTTP/1.1, HTTP/2 with frame-level streams, HTTP/2 with stream channels
    /// (`decompress`); each with a body in memory and a streamed one.
    static let cases: [(LinkOptions.HTTPVersion, Bool, Bool)] = [
        (.http1_1, false, false), (.http1_1, true, false), (.http2, false, false), (.http2, true, false),
        (.http2, false, true), (.http2, true, true),
    ]

    @Test(arguments: Self.cases)
    func anUploadSlowerThanTheIdleBoundIsAnswered(
        version: LinkOptions.HTTPVersion,
        streamed: Bool,
        decompress: Bool
    ) async throws {
        let client = Self.client(version, decompress: decompress)
        let label = "\(version), streamed \(streamed), decompress \(decompress)"
        let clock = ContinuousClock()
        var request = try AccessoryRequest(method: .post, url: "/slow-sink")
        request.body = Self.body(size: Self.uploadSize, streamed: streamed)
        let started = clock.now
        let (head, body) = try await client.data(request)
        let took = clock.now - started
        #expect(head.status == .ok, "\(label)")
        #expect(String(buffer: body) == "\(Self.uploadSize)", "\(label)")
        // The upload really outlasted the bound, or the test proves nothing.
        #expect(took > Self.idleTimeout, "\(label): took \(took)")
        try await Self.expectTheNextIsAnswered(client, within: TimeBounds.scaled(.seconds(1)), label)
        await client.shutdown()
    }

    /// A caller cancelled while its body waits for a device that takes none of it is released
    /// at once, not at the idle bound (HTTP/1.1: the stream the body can never finish on is
    /// closed; HTTP/2: the write's wait ends and the stream is reset), and the next request is
    /// answered. Before 2026-12-06 the cancel took the whole bound on both.
    @Test(arguments: Self.cases.filter { $0.1 })
    func aCancelWhileTheDeviceTakesNoneOfTheBodyEndsTheCallAtOnce(
        version: LinkOptions.HTTPVersion,
        streamed: Bool,
        decompress: Bool
    ) async throws {
        let client = Self.client(version, decompress: decompress)
        let label = "\(version), decompress \(decompress)"
        var request = try AccessoryRequest(method: .post, url: "/sink")
        request.body = Self.body(size: 64 << 20, streamed: true)
        let upload = Task { try await client.data(request) }
        // Long enough for the window and the socket buffers to fill and the body's write to wait.
        try await Task.sleep(for: .milliseconds(500))
        let clock = ContinuousClock()
        let cancelledAt = clock.now
        upload.cancel()
        _ = await upload.result
        let took = clock.now - cancelledAt
        #expect(took < Self.idleTimeout / 2, "\(label): the cancelled upload ended \(took) after its cancel")
        try await Self.expectTheNextIsAnswered(client, within: TimeBounds.scaled(.seconds(1)), label)
        await client.shutdown()
    }

    /// The other half of the rule: a device that takes none of the body is found after the
    /// bound, not waited for until the body's last byte leaves (never).
    @Test(arguments: Self.cases)
    func anUploadTheDeviceStopsTakingEndsAfterTheIdleBound(
        version: LinkOptions.HTTPVersion,
        streamed: Bool,
        decompress: Bool
    ) async throws {
        let client = Self.client(version, decompress: decompress)
        let label = "\(version), streamed \(streamed), decompress \(decompress)"
        let clock = ContinuousClock()
        var request = try AccessoryRequest(method: .post, url: "/sink")
        request.body = Self.body(size: 8 << 20, streamed: streamed)
        let started = clock.now
        do {
            _ = try await client.data(request)
            Issue.record("\(label): the upload nobody read was answered as a success")
        } catch {
            #expect(error.code == .timedOut, "\(label): \(error)")
            #expect(
                (error.underlying as? HTTPLinkError)?.code == .idleTimeout,
                "\(label): \(String(reflecting: error.underlying))"
            )
        }
        let waited = clock.now - started
        #expect(waited >= Self.idleTimeout, "\(label): ended after \(waited)")
        #expect(waited < Self.idleTimeout + TimeBounds.scaled(.seconds(2)), "\(label): ended after \(waited)")
        try await Self.expectTheNextIsAnswered(client, within: TimeBounds.scaled(.seconds(2)), label)
        await client.shutdown()
    }
}
