import AccessoryTransport
import NIOCore
import Synchronization

/// Lets one task through at a time, in the order they arrived. A waiting task that is
/// cancelled leaves the queue and throws, without disturbing the others.
final class FIFOGate: Sendable {
    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var busy = false
        var waiters = CircularBuffer<Waiter>()
        var nextID: UInt64 = 0
    }

    private let state = TrackedMutex(State())

    /// The wait passed the deadline given to ``enter(expiringAt:on:)``.
    struct Expired: Error {}

    /// Waits for the gate. Throws `CancellationError` if the task is cancelled while waiting,
    /// and ``Expired`` if `deadline` passes first (timed on `eventLoop`).
    func enter(expiringAt deadline: NIODeadline? = nil, on eventLoop: (any EventLoop)? = nil) async throws {
        let id: UInt64? = self.state.withLock { state in
            if !state.busy {
                state.busy = true
                return nil
            }
            state.nextID += 1
            return state.nextID
        }
        guard let id else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // The gate is looked at again in the same step as the waiter joins the queue:
                // a `leave()` between the first look and this one found no waiter and opened
                // the gate, and a waiter queued behind an open gate would wait for ever.
                let now: EnterNow? = self.state.withLock { state in
                    if Task.isCancelled { return .cancelled }
                    if !state.busy {
                        state.busy = true
                        return .entered
                    }
                    state.waiters.append(Waiter(id: id, continuation: continuation))
                    return nil
                }
                switch now {
                case .cancelled:
                    continuation.resume(throwing: CancellationError())
                case .entered:
                    continuation.resume()
                case nil:
                    if let deadline, let eventLoop {
                        // Not cancelled when the waiter gets through: it then finds nothing to remove.
                        eventLoop.scheduleTask(deadline: deadline) { self.remove(id, throwing: Expired()) }
                    }
                }
            }
        } onCancel: {
            self.remove(id, throwing: CancellationError())
        }
    }

    private enum EnterNow {
        case cancelled
        case entered
    }

    private func remove(_ id: UInt64, throwing error: any Error) {
        let removed: Waiter? = self.state.withLock { state in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiters.remove(at: index)
        }
        removed?.continuation.resume(throwing: error)
    }

    /// How many callers wait in the queue now.
    var waiting: Int { self.state.withLock { $0.waiters.count } }

    /// Lets the next waiter through, or opens the gate.
    func leave() {
        let next: Waiter? = self.state.withLock { state in
            if let next = state.waiters.popFirst() { return next }
            state.busy = false
            return nil
        }
        next?.continuation.resume()
    }
}
