import AccessoryClient
import AccessoryHTTP1
import AccessoryResponder
import AccessoryTestSupport
import NIOCore
import Testing

/// A caller's deadline on an HTTP/2 link ends the call by then wherever the exchange waits for
/// the device (no answer, a body that stops, an upload the device does not take), resets only
/// that stream, and the connection answers the next request at once. The deadline is a timer on
/// the stream's event loop, not a task racing the exchange; these tests hold it to the same
/// promises the task kept.
@Suite("HTTP/2 deadlines", .timeLimit(.minutes(1)))
struct HTTP2DeadlineTests {
    static let deadline = Duration.milliseconds(150)

    /// A 64 MiB upload: far more than the stream's and the connection's flow-control windows.
    static func largeUpload() -> HTTPRequestBody {
        .stream(length: nil) { writer in
            let piece = ByteBuffer(repeating: 0x55, count: 64 << 10)
            for _ in 0..<1024 { try await writer.write(piece) }
        }
    }

    @Test func aDeadlineEndsEveryKindOfWaitAndTheNextIsAnswered() async throws {
        // The idle bound is far off, so only the deadline can end these calls.
        let client = http2Client(of: stallingResponder(), name: "deadline responder") { $0.idleTimeout = .seconds(30) }
        _ = try await client.get("/fine")
        let clock = ContinuousClock()
        for attempt in 1...16 {
            for path in ["/silent", "/stall", "/sink"] {
                var request = try AccessoryRequest(method: path == "/sink" ? .post : .get, url: path)
                if path == "/sink" { request.body = Self.largeUpload() }
                request.timeout = Self.deadline
                let started = clock.now
                do {
                    _ = try await client.data(request)
                    Issue.record("attempt \(attempt): \(path) was answered as a success")
                } catch {
                    #expect(error.code == .timedOut, "attempt \(attempt), \(path): \(error)")
                    #expect(
                        (error.underlying as? HTTPLinkError)?.code == .exchangeTimeout,
                        "attempt \(attempt), \(path): \(String(reflecting: error.underlying))"
                    )
                }
                let waited = clock.now - started
                #expect(waited >= Self.deadline, "attempt \(attempt), \(path): ended after \(waited)")
                #expect(
                    waited < Self.deadline + TimeBounds.scaled(.milliseconds(300)),
                    "attempt \(attempt), \(path): ended after \(waited)"
                )
                try await expectFineAtOnce(client, "attempt \(attempt), \(path)")
            }
        }
        #expect(client.http2?.openCount == 1, "a deadline must reset its stream, not the connection")
        await client.shutdown()
    }

    /// A deadline that passes after the whole response arrived fails nothing: the handler's
    /// own work after that is its own (as on an HTTP/1.1 link).
    @Test func aDeadlineAfterTheResponseEndedFailsNothing() async throws {
        let client = http2Client(of: stallingResponder(), name: "deadline responder")
        _ = try await client.get("/fine")  // the connection is open: the answer comes well in time
        // Far more than a warm /fine takes. Under a sanitizer, beside a whole test target, one
        // took over a second (a CI run); stretched less than other bounds, as the handler's
        // sleep past it is stretched with it.
        let deadline = Duration.seconds(TimeBounds.sanitized ? 3 : 1)
        for attempt in 1...3 {
            var request = try AccessoryRequest(url: "/fine")
            request.timeout = deadline
            let text = try await client.execute(request) { response in
                let body = try await response.body.collect(upTo: 1024)
                try await Task.sleep(for: deadline + .milliseconds(100))
                return String(buffer: body)
            }
            #expect(text == "fine", "attempt \(attempt)")
        }
        await client.shutdown()
    }

    /// A deadline that has passed before the call starts ends it at once, without a stream.
    @Test func aDeadlineAlreadyPassedEndsTheCallAtOnce() async throws {
        let client = http2Client(of: stallingResponder(), name: "deadline responder")
        _ = try await client.get("/fine")
        var request = try AccessoryRequest(url: "/fine")
        request.timeout = .zero
        await #expect(throws: AccessoryClientError.self) { _ = try await client.data(request) }
        let (head, _) = try await client.get("/fine")
        #expect(head.status == .ok)
        await client.shutdown()
    }
}
