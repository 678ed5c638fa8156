import AccessoryClient
import AccessoryHTTP1
import AccessoryResponder
import AccessoryTestSupport
import AccessoryTransport
import NIOCore
import NIOPosix
import Testing

/// A stream that fails while its body is read reaches the caller as the client's own error
/// (it reached callers as a raw swift-nio-http2 error), a stream the device leaves silent ends
/// at the idle bound, and the link answers the next request.
@Suite("HTTP/2 failures of one stream", .timeLimit(.minutes(1)))
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
        let client = http2Client(of: responder, name: "broken-body responder")
        for attempt in 1...16 {
            do {
                _ = try await client.get("/broken")
                Issue.record("attempt \(attempt): a body the device broke off was delivered as a success")
            } catch {
                #expect(error.code == .transportFailed, "attempt \(attempt): \(error)")
                // Named as RFC 9113 names the code, not as swift-nio-http2 prints its error.
                #expect(
                    error.message.hasSuffix("the device reset the HTTP/2 stream (CANCEL)"),
                    "attempt \(attempt): \(error)"
                )
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

    /// A status outside 100-599 (RFC 9110 §15) fails the exchange as `malformed-response`, as
    /// on an HTTP/1.1 link, and the connection answers the next request.
    @Test(arguments: [600, 999, 99])
    func aStatusOutsideTheRangeIsMalformedAndTheNextIsAnswered(code: Int) async throws {
        let responder = HTTPResponder { request in
            if request.head.path == "/odd" { return ResponderResponse(status: .init(code: code)) }
            return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "fine")))
        }
        let client = http2Client(of: responder, name: "odd-status responder")
        for attempt in 1...4 {
            do {
                let (head, _) = try await client.get("/odd")
                Issue.record("attempt \(attempt): status \(head.status.code) was delivered as an answer")
            } catch {
                let linkError = error.underlying as? HTTPLinkError
                #expect(linkError?.code == .malformedResponse, "attempt \(attempt): \(error)")
                #expect(error.message.contains("status code \(code)"), "attempt \(attempt): \(error)")
            }
            let (head, body) = try await client.get("/fine")
            #expect(head.status == .ok && String(buffer: body) == "fine", "attempt \(attempt)")
        }
        await client.shutdown()
    }

    /// A device that never answers a stream, or stops in the middle of its body, no longer holds
    /// the caller forever on HTTP/2 (the link's `idleTimeout` applied to HTTP/1.1 only): the call
    /// ends with `timed-out` after the idle bound, the stream is reset, and the connection
    /// answers the next request at once.
    ///
    /// The idle bound also holds the `/fine` after each fault: under AddressSanitizer, with the
    /// target's other suites loading both cores, 300 ms was once not enough for it (a local run of
    /// 2026-11-29), so there it is five times longer, and four tries take the place of 16.
    @Test func aSilentStreamEndsAfterTheIdleTimeoutAndTheNextIsAnswered() async throws {
        let idle = Duration.milliseconds(300) * (TimeBounds.sanitized ? 5 : 1)
        let client = http2Client(of: stallingResponder(), name: "silent responder") {
            $0.idleTimeout = idle
        }
        let clock = ContinuousClock()
        for attempt in 1...(TimeBounds.sanitized ? 4 : 16) {
            for path in ["/silent", "/stall"] {
                let started = clock.now
                do {
                    _ = try await client.get(path)
                    Issue.record("attempt \(attempt): \(path) was answered as a success")
                } catch {
                    #expect(error.code == .timedOut, "attempt \(attempt), \(path): \(error)")
                    #expect(
                        (error.underlying as? HTTPLinkError)?.code == .idleTimeout,
                        "attempt \(attempt), \(path): \(String(reflecting: error.underlying))"
                    )
                }
                let waited = clock.now - started
                #expect(waited >= idle, "attempt \(attempt), \(path): ended after \(waited)")
                #expect(
                    waited < TimeBounds.scaled(.seconds(2)),
                    "attempt \(attempt), \(path): ended after \(waited)"
                )
                let next = clock.now
                let (head, body) = try await client.get("/fine")
                #expect(head.status == .ok && String(buffer: body) == "fine", "attempt \(attempt)")
                #expect(clock.now - next < TimeBounds.scaled(.seconds(1)), "attempt \(attempt): the next took long")
            }
        }
        #expect(client.http2?.openCount == 1)
        await client.shutdown()
    }
}
