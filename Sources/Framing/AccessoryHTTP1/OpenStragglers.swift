import AccessoryTransport

/// Opens that a timeout gave up on but that still run: cancelled, they are closing and
/// releasing what they made (an `exec:` child, a claimed interface). The request has already
/// failed with `open-timeout`, on time; the link's shutdown waits for them, so that nothing they
/// hold outlives the link (a CLI shuts its link down and exits right after such a failure).
package final class OpenStragglers: Sendable {
    private struct State {
        var running: [UInt64: Task<Void, Never>] = [:]
        var nextID: UInt64 = 0
    }

    private let state = TrackedMutex(State())

    /// No opens yet.
    package init() {}

    /// Keeps `task` until it ends.
    package func track(_ task: Task<Void, Never>) {
        let id: UInt64 = self.state.withLock { state in
            state.nextID += 1
            state.running[state.nextID] = task
            return state.nextID
        }
        Task {
            await task.value
            self.state.withLock { _ = $0.running.removeValue(forKey: id) }
        }
    }

    /// Opens still running.
    package var count: Int { self.state.withLock { $0.running.count } }

    /// Waits until every open tracked now has ended, or `bound` has passed.
    package func waitForAll(atMost bound: Duration) async {
        await waitForTasks(self.state.withLock { Array($0.running.values) }, atMost: bound)
    }
}
