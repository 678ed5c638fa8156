import NIOCore
import Synchronization

extension EventLoopFuture where Value: Sendable {
    /// The future's value, or `CancellationError` as soon as the calling task is cancelled
    /// (`get()` waits for the future whatever becomes of the task).
    func valueUnlessCancelled() async throws -> Value {
        let waiter = Mutex<CheckedContinuation<Value, any Error>?>(nil)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let cancelledAlready = waiter.withLock { slot in
                    if Task.isCancelled { return true }
                    slot = continuation
                    return false
                }
                if cancelledAlready {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                self.whenComplete { result in
                    waiter.withLock { slot in
                        defer { slot = nil }
                        return slot
                    }?.resume(with: result)
                }
            }
        } onCancel: {
            waiter.withLock { slot in
                defer { slot = nil }
                return slot
            }?.resume(throwing: CancellationError())
        }
    }
}
