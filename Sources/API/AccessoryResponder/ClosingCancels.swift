import NIOCore
import Synchronization

/// Serving work that must stop when its link does: a host that resets an HTTP/2 stream (its
/// request was cancelled or timed out) or hangs up a plain link no longer wants the answer, so
/// the handler still working on it (a sleep, a sensor poll, a long computation) is cancelled
/// then, not when it next writes.
enum ClosingCancels {
    /// Runs `body` in a task of its own on `executor` and waits for it; the task is cancelled
    /// when `channel` closes (a half-close of the input is not a close) or when the caller is.
    static func run(
        until channel: any Channel,
        on executor: any TaskExecutor,
        _ body: @escaping @Sendable () async -> Void
    ) async {
        let task = Task(executorPreference: executor, operation: body)
        channel.closeFuture.whenComplete { _ in task.cancel() }
        await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }
    }
}

/// The tasks serving one HTTP/2 connection's request streams, one task each: a stream's task is
/// cancelled when its stream closes (the host reset it, or the connection ended), and all of
/// them when serving the connection is cancelled; ``waitForAll()`` waits for the ones still
/// running. A task group would hold them as well, but cannot cancel one child alone, and a
/// second task per stream to make that possible cost 5-7 % of HTTP/2 requests per second.
final class StreamTasks: Sendable {
    private struct State {
        var running: [UInt64: Task<Void, Never>] = [:]
        /// Tasks that ended before they were registered (possible on a thread pool).
        var endedEarly: Set<UInt64> = []
        var nextID: UInt64 = 0
        var cancelled = false
    }

    private let state = Mutex(State())

    /// Serves a stream with `body` in a task of its own on `executor`, cancelled once `closed`
    /// (the stream's end) completes.
    func start(
        until closed: EventLoopFuture<Void>,
        on executor: any TaskExecutor,
        _ body: @escaping @Sendable () async -> Void
    ) {
        let id = self.state.withLock { state in
            defer { state.nextID &+= 1 }
            return state.nextID
        }
        let task = Task(executorPreference: executor) {
            await body()
            self.state.withLock { state in
                if state.running.removeValue(forKey: id) == nil { state.endedEarly.insert(id) }
            }
        }
        let cancelled = self.state.withLock { state in
            if state.endedEarly.remove(id) == nil { state.running[id] = task }
            return state.cancelled
        }
        if cancelled { task.cancel() }
        closed.whenComplete { _ in task.cancel() }
    }

    /// Cancels every task, and every task started from now on.
    func cancelAll() {
        let tasks = self.state.withLock { state in
            state.cancelled = true
            return Array(state.running.values)
        }
        for task in tasks { task.cancel() }
    }

    /// Returns when no task is running.
    func waitForAll() async {
        while let task = self.state.withLock({ $0.running.first?.value }) {
            await task.value
        }
    }
}
