import AccessoryClient
import AccessoryHTTP1
import AccessoryResponder
import AccessoryTestSupport
import NIOCore
import Testing

/// A host that gives up on an HTTP/2 exchange resets its stream (RST_STREAM): the handler still
/// working on it is cancelled then, not when it next writes, and the connection answers the
/// next request at once. Before, a handler sleeping 20 s slept them out for a caller long gone.
@Suite("HTTP/2: a reset stream cancels its handler", .timeLimit(.minutes(2)))
struct HTTP2HandlerCancellationTests {
    enum Ending: String, CaseIterable, CustomTestStringConvertible {
        /// The caller's task is cancelled.
        case cancel
        /// The caller's deadline passes.
        case deadline

        var testDescription: String { self.rawValue }
    }

    @Test(arguments: Ending.allCases)
    func aResetStreamCancelsItsHandlerAndTheNextIsAnswered(ending: Ending) async throws {
        let probe = CancellationProbe()
        let responder = HTTPResponder { request in
            guard request.head.path == "/wait" else {
                return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "fine")))
            }
            try await probe.wait(for: .seconds(20))
            return ResponderResponse(status: .ok)
        }
        let client = http2Client(of: responder, name: "waiting responder") { $0.idleTimeout = .seconds(30) }
        _ = try await client.get("/fine")
        for attempt in 1...16 {
            var request = try AccessoryRequest(url: "/wait")
            switch ending {
            case .cancel:
                let call = Task { try await client.data(request) }
                let started = await probe.holds(within: TimeBounds.scaled(.seconds(2))) { $0.started == attempt }
                #expect(started, "attempt \(attempt): the handler did not start")
                call.cancel()
                let result = await call.result
                #expect(throws: (any Error).self, "attempt \(attempt)") { try result.get() }
            case .deadline:
                // Long enough for the request to reach the handler even when other suites load
                // both cores (100 ms was not, with the back-pressure suites beside it).
                request.timeout = TimeBounds.scaled(.milliseconds(300))
                await #expect(throws: AccessoryClientError.self, "attempt \(attempt)") {
                    try await client.data(request)
                }
                let started = await probe.holds(within: TimeBounds.scaled(.seconds(1))) { $0.started == attempt }
                #expect(started, "attempt \(attempt): the handler did not start")
            }
            let stopped = await probe.holds(within: TimeBounds.scaled(.milliseconds(500))) { $0.cancelled == attempt }
            #expect(stopped, "attempt \(attempt): \(probe.cancelled) of \(probe.started) abandoned handlers cancelled")
            try await expectFineAtOnce(client, "attempt \(attempt)")
        }
        #expect(client.http2?.openCount == 1, "giving up must reset the stream, not the connection")
        await client.shutdown()
    }
}
