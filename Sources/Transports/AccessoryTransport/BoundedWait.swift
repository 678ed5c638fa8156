/// Waits until every task in `tasks` has ended or `bound` has passed, whichever comes first.
///
/// For a cleanup waited for at most so long (a cancelled open, a timed-out one): neither the
/// caller's cancellation nor a task that ignores its own changes the bound. A task group does
/// not do this: it waits for a child that awaits a task's value however long that takes, and in
/// a cancelled caller its sleeping child ends at once.
package func waitForTasks(_ tasks: [Task<Void, Never>], atMost bound: Duration) async {
    guard !tasks.isEmpty else { return }
    let once = ResumeOnce()
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        once.install(continuation)
        Task {
            for task in tasks { await task.value }
            once.resume()
        }
        Task {
            await sleepUncancelled(for: bound)
            once.resume()
        }
    }
}

/// A continuation resumed by the first of several callers.
private final class ResumeOnce: Sendable {
    private let continuation = TrackedMutex<CheckedContinuation<Void, Never>?>(nil)

    func install(_ continuation: CheckedContinuation<Void, Never>) {
        self.continuation.withLock { $0 = continuation }
    }

    func resume() {
        let continuation = self.continuation.withLock { slot in
            defer { slot = nil }
            return slot
        }
        continuation?.resume()
    }
}
