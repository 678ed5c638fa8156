import AccessoryClient
import AccessoryEmulator
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
    /// The bound for the next answer: generous against a loaded CI machine, far below the
    /// drain bound (5 s) that the old behaviour took.
    static let nextAnswerBound: Duration = .milliseconds(500)

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
            for attempt in 0..<16 {
                let slow = Task { try await client.data(AccessoryRequest(path: "/delay/10")) }
                try await Task.sleep(for: .milliseconds(20 + attempt * 5))
                slow.cancel()
                _ = await slow.result
                let took = try await self.timedStatus(client)
                #expect(took < Self.nextAnswerBound, "attempt \(attempt): the next answer took \(took)")
            }
            await client.shutdown()
        }
    }

    @Test func afterATimeoutTheNextRequestIsAnsweredAtOnce() async throws {
        try await withEmulatorOnUnixSocket { transport in
            let client = AccessoryClient(transport: transport)
            for attempt in 0..<3 {
                let started = ContinuousClock.now
                await #expect(throws: AccessoryClientError.self) {
                    _ = try await client.data(AccessoryRequest(path: "/delay/10", timeout: .milliseconds(300)))
                }
                let timedOutAfter = ContinuousClock.now - started
                #expect(
                    timedOutAfter < .seconds(2),
                    "attempt \(attempt): the timeout ended the call after \(timedOutAfter)"
                )
                let took = try await self.timedStatus(client)
                #expect(took < Self.nextAnswerBound, "attempt \(attempt): the next answer took \(took)")
            }
            await client.shutdown()
        }
    }

    @Test func aBodyLeftHalfReadDoesNotHoldUpTheNextRequest() async throws {
        try await withEmulatorOnUnixSocket { transport in
            let client = AccessoryClient(transport: transport)
            for _ in 0..<16 {
                // A large body the caller stops reading after its first part.
                try await client.execute(AccessoryRequest(path: "/bytes/50000000")) { response in
                    for try await _ in response.body { break }
                }
                let took = try await self.timedStatus(client)
                #expect(took < Self.nextAnswerBound, "the next answer took \(took)")
            }
            await client.shutdown()
        }
    }
}
