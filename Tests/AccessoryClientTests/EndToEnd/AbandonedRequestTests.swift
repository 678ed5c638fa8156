import AccessoryClient
import AccessoryEmulator
import AccessoryTestSupport
import AccessoryTransport
import Foundation
import NIOPosix
import Testing

/// An abandoned request (cancelled, timed out) must not hold up the next one on a transport
/// that opens independent streams: the link closes the abandoned stream instead of draining
/// it, and the next request goes out on a fresh one at once. Before, the next request waited
/// for the drain bound (5 s) behind a device that was still "thinking".
@Suite(.timeLimit(.minutes(1)))
struct AbandonedRequestTests {
    /// The next answer comes within 50 ms (issue 19; measured 1-2 ms): the median of the tries
    /// must be under it, and every try under `outlierBound`, which a loaded machine's scheduling
    /// may need and which is still far below the 5 s drain the old behaviour waited for.
    static let nextAnswerBound: Duration = TimeBounds.scaled(.milliseconds(50))
    static let outlierBound: Duration = TimeBounds.scaled(.milliseconds(500))

    /// Checks the times the next answers took (see ``nextAnswerBound``).
    func expectPrompt(_ times: [Duration], sourceLocation: SourceLocation = #_sourceLocation) {
        let sorted = times.sorted()
        guard !sorted.isEmpty else { return }
        let median = sorted[sorted.count / 2]
        #expect(median < Self.nextAnswerBound, "median \(median) of \(sorted)", sourceLocation: sourceLocation)
        #expect(
            sorted[sorted.count - 1] < Self.outlierBound,
            "slowest \(sorted[sorted.count - 1]) of \(sorted)",
            sourceLocation: sourceLocation
        )
    }

    /// The emulator served on a unix socket, as a daemon or nginx would serve an accessory.
    func withEmulatorOnUnixSocket(_ body: (UnixSocketTransport) async throws -> Void) async throws {
        let path = "/tmp/ahab-\(UInt32.random(in: 0...UInt32.max)).sock"
        let responder = EmulatedAccessory().makeResponder()
        let server = Task {
            try await responder.serveUnixSocket(path: path, group: MultiThreadedEventLoopGroup.singleton)
        }
        defer { server.cancel() }
        for _ in 0..<200 where !FileManager.default.fileExists(atPath: path) {
            try await Task.sleep(for: .milliseconds(10))
        }
        try await body(UnixSocketTransport(path: path))
    }

    /// Asks for /status and returns how long the answer took.
    func timedStatus(_ client: AccessoryClient) async throws -> Duration {
        let started = ContinuousClock.now
        let (head, _) = try await client.data(AccessoryRequest(path: "/status", timeout: .seconds(10)))
        #expect(head.status == .ok)
        return ContinuousClock.now - started
    }

    @Test func afterACancelTheNextRequestIsAnsweredAtOnce() async throws {
        try await withEmulatorOnUnixSocket { transport in
            let client = AccessoryClient(transport: transport)
            // Intermittent by nature (where in the exchange the cancel lands): 16 tries.
            var times: [Duration] = []
            for attempt in 0..<16 {
                let slow = Task { try await client.data(AccessoryRequest(path: "/delay/10")) }
                try await Task.sleep(for: .milliseconds(20 + attempt * 5))
                slow.cancel()
                _ = await slow.result
                times.append(try await self.timedStatus(client))
            }
            self.expectPrompt(times)
            await client.shutdown()
        }
    }

    @Test func afterATimeoutTheNextRequestIsAnsweredAtOnce() async throws {
        try await withEmulatorOnUnixSocket { transport in
            let client = AccessoryClient(transport: transport)
            // 16 tries, like the cancel: with 3, a sanitized run's first second (every test of
            // the target starting at once on 2 cores) made two of them 0.6 s and the median too.
            var times: [Duration] = []
            for attempt in 0..<16 {
                let started = ContinuousClock.now
                await #expect(throws: AccessoryClientError.self) {
                    _ = try await client.data(AccessoryRequest(path: "/delay/10", timeout: .milliseconds(300)))
                }
                let timedOutAfter = ContinuousClock.now - started
                #expect(
                    timedOutAfter < .seconds(2),
                    "attempt \(attempt): the timeout ended the call after \(timedOutAfter)"
                )
                times.append(try await self.timedStatus(client))
            }
            self.expectPrompt(times)
            await client.shutdown()
        }
    }

    @Test func aBodyLeftHalfReadDoesNotHoldUpTheNextRequest() async throws {
        try await withEmulatorOnUnixSocket { transport in
            let client = AccessoryClient(transport: transport)
            var times: [Duration] = []
            for _ in 0..<16 {
                // A large body the caller stops reading after its first part.
                try await client.execute(AccessoryRequest(path: "/bytes/50000000")) { response in
                    for try await _ in response.body { break }
                }
                times.append(try await self.timedStatus(client))
            }
            self.expectPrompt(times)
            await client.shutdown()
        }
    }
}
