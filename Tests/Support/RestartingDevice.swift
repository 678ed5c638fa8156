import AccessoryClient
import AccessoryCrypto
import AccessoryEmulator
import AccessoryResponder
import NIOCore
import Synchronization

/// A device that restarts after each graceful shutdown: every open of a test's link is served
/// by ``current`` as it is then, and a shutdown puts a new responder there for the next open.
/// Counts the opens and the serve calls that returned.
public final class RestartingDevice: Sendable {
    public let current = Mutex(EmulatedAccessory().makeResponder())
    public let opens = Atomic<Int>(0)
    public let ended = Atomic<Int>(0)

    public init() {}

    /// The responder for a new link (counted as an open).
    public func responderForNewLink() -> HTTPResponder {
        self.opens.add(1, ordering: .relaxed)
        return self.current.withLock { $0 }
    }

    /// Call when a serve call returned.
    public func linkEnded() {
        self.ended.add(1, ordering: .relaxed)
    }

    /// `rounds` times: a GET of `path` whose device begins its graceful shutdown (and restarts)
    /// once the first chunk arrived. Returns what went wrong, one line per problem: a body that is
    /// not whole (its SHA-256 differs from a GET before any shutdown), a serve call still running
    /// 2 s after the answer ended, or a next `/status` not answered within 1 s (both scaled by
    /// ``TimeBounds``). Throws what a request threw.
    public func shutDownInTheMiddleOfDownloads(
        _ client: AccessoryClient,
        path: String,
        rounds: Int
    ) async throws -> [String] {
        var problems: [String] = []
        let (_, whole) = try await client.get(path)
        let expected = Digest.hex(.sha256, of: whole.readableBytesView)
        for round in 1...rounds {
            let responder = self.current.withLock { $0 }
            let endedBefore = self.ended.load(ordering: .relaxed)
            let body = try await client.execute(try AccessoryRequest(url: path)) { response in
                var collected = ByteBuffer()
                for try await var chunk in response.body {
                    collected.writeBuffer(&chunk)
                    if !responder.shutdown.hasBegun {
                        self.current.withLock { $0 = EmulatedAccessory().makeResponder() }
                        responder.shutdown.begin()
                    }
                }
                return collected
            }
            if Digest.hex(.sha256, of: body.readableBytesView) != expected {
                problems.append("round \(round): the download was not whole (\(body.readableBytes) B)")
            }
            let clock = ContinuousClock()
            let shutDown = clock.now
            while self.ended.load(ordering: .relaxed) == endedBefore,
                clock.now - shutDown < TimeBounds.scaled(.seconds(2))
            {
                try await Task.sleep(for: .milliseconds(10))
            }
            if self.ended.load(ordering: .relaxed) == endedBefore {
                problems.append(
                    "round \(round): the responder still serves \(clock.now - shutDown) after its answer ended"
                )
            }
            let started = clock.now
            let (head, status) = try await client.get("/status")
            if head.status != .ok || !String(buffer: status).contains("model") {
                problems.append("round \(round): the next request got \(head.status)")
            }
            if clock.now - started >= TimeBounds.scaled(.seconds(1)) {
                problems.append("round \(round): the next request took \(clock.now - started)")
            }
        }
        return problems
    }
}
