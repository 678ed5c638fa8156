import AccessoryTransport
import Synchronization

/// Lets at most `limit` exchanges onto the accessory's link at once (one on an HTTP/1.1 link,
/// which carries one exchange at a time) and queues the rest in arrival order. A request that
/// waits longer than its bound is turned away, so the bridge answers 503 instead of hanging.
final class BridgeAdmission: Sendable {
    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var active = 0
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
        /// Waiters that have their id but are not queued yet (between the two steps of
        /// ``acquire(timeout:)``).
        var reserved: Set<UInt64> = []
        /// Of those, the ones given up before they were queued (a timeout or cancel that came
        /// first). Only a reserved id is ever put here, so it cannot grow: a give-up that comes
        /// after the waiter was admitted or turned away (its timer firing as the turn came) finds
        /// the id in neither place and does nothing.
        var abandoned: Set<UInt64> = []
        /// Since when no exchange has run nor waited (`nil` while one does).
        var idleSince: ContinuousClock.Instant? = .now
        /// The bridge is releasing the device: new requests wait until it is done.
        var closed = false
    }

    let limit: Int
    private let state = TrackedMutex(State())

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Exchanges on the link now, and requests waiting for it.
    var load: (active: Int, queued: Int) { self.state.withLock { ($0.active, $0.waiters.count) } }

    /// Waits for a turn; returns false if none came within `timeout` (or the task was cancelled).
    /// Every `true` must be followed by one ``release()``.
    func acquire(timeout: Duration) async -> Bool {
        let id: UInt64? = self.state.withLock { state in
            state.idleSince = nil
            if state.active < self.limit && state.waiters.isEmpty && !state.closed {
                state.active += 1
                return nil
            }
            state.nextID += 1
            state.reserved.insert(state.nextID)
            return state.nextID
        }
        guard let id else { return true }
        let expiry = Task {
            guard (try? await Task.sleep(for: timeout)) != nil else { return }  // admitted in time
            self.giveUp(id)
        }
        defer { expiry.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let admitted: Bool? = self.state.withLock { state in
                    state.reserved.remove(id)
                    if state.abandoned.remove(id) != nil { return false }
                    // A turn may have come free between the check above and now.
                    if state.active < self.limit && state.waiters.isEmpty && !state.closed {
                        state.active += 1
                        return true
                    }
                    state.waiters.append(Waiter(id: id, continuation: continuation))
                    return nil
                }
                if let admitted { continuation.resume(returning: admitted) }
            }
        } onCancel: {
            self.giveUp(id)
        }
    }

    /// Ends an exchange: the longest-waiting request, if any, takes its turn.
    func release() {
        let next: Waiter? = self.state.withLock { state in
            if state.waiters.isEmpty {
                state.active -= 1
                if state.active == 0 { state.idleSince = .now }
                return nil
            }
            return state.waiters.removeFirst()  // the turn passes on; `active` stays
        }
        next?.continuation.resume(returning: true)
    }

    /// Since when no exchange has run nor waited; `nil` while one does.
    var idleSince: ContinuousClock.Instant? { self.state.withLock { $0.idleSince } }

    /// Stops admitting (requests that arrive wait) if nothing runs or waits now; returns
    /// whether it did. Every `true` must be followed by one ``reopen()``.
    func closeIfIdle() -> Bool {
        self.state.withLock { state in
            guard state.active == 0, state.waiters.isEmpty, !state.closed else { return false }
            state.closed = true
            return true
        }
    }

    /// Admits again, the requests that waited meanwhile first.
    func reopen() {
        let admitted: [Waiter] = self.state.withLock { state in
            state.closed = false
            var admitted: [Waiter] = []
            while state.active < self.limit, !state.waiters.isEmpty {
                state.active += 1
                admitted.append(state.waiters.removeFirst())
            }
            if state.active == 0 { state.idleSince = .now }
            return admitted
        }
        for waiter in admitted { waiter.continuation.resume(returning: true) }
    }

    /// Ids given up before they were queued and not yet seen by their waiter (for tests).
    var abandonedCount: Int { self.state.withLock { $0.abandoned.count } }

    func giveUp(_ id: UInt64) {
        let waiter: Waiter? = self.state.withLock { state in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
                if state.reserved.contains(id) { state.abandoned.insert(id) }
                return nil
            }
            return state.waiters.remove(at: index)
        }
        waiter?.continuation.resume(returning: false)
    }
}
