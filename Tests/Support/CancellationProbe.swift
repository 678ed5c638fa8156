import Synchronization

/// Counts how often a handler started a long wait and how often that wait was cancelled, so a
/// test can ask whether the work of an exchange the host abandoned was stopped, and by when.
public final class CancellationProbe: Sendable {
    private let counts = Mutex<(started: Int, cancelled: Int)>((0, 0))

    public init() {}

    /// How many waits started.
    public var started: Int { self.counts.withLock { $0.started } }
    /// How many waits were cancelled.
    public var cancelled: Int { self.counts.withLock { $0.cancelled } }

    /// Waits `duration` as a handler's work would, counting the start and a cancellation.
    public func wait(for duration: Duration) async throws {
        self.counts.withLock { $0.started += 1 }
        do {
            try await Task.sleep(for: duration)
        } catch {
            self.counts.withLock { $0.cancelled += 1 }
            throw error
        }
    }

    /// Whether `condition` holds within `bound` (checked every 2 ms).
    public func holds(within bound: Duration, _ condition: (CancellationProbe) -> Bool) async -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + bound
        while !condition(self) {
            guard clock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return true
    }
}
