import Dispatch
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The state one ``AccessoryURLProtocol`` object shares between the session's work queue and
/// the Swift task that runs its exchange, and the mechanism that moves events from the second
/// to the first.
///
/// ## Why every client call is made inside `startLoading`
/// FoundationNetworking's protocol client is not thread-safe: client calls made from another
/// thread race with the session's task registry and crash the process. Calls made
/// synchronously inside `startLoading` (on the task's work queue) never do. So the exchange
/// never calls the client: it ``post(_:)``s events here and asks for a *wake*: on a private
/// serial queue it calls `task.suspend(); task.resume()`, which makes the session call
/// `stopLoading()` and then `startLoading()` again on the work queue, where
/// ``takeEvents()`` hands the events to the protocol, which delivers them to the client.
///
/// ## Why this type is `@unchecked Sendable` (the proof)
/// - Every stored `var` is read and written only while `lock` is held, and no method calls
///   out (to the client, the task, a continuation or a Swift task) while holding it.
/// - `task` is only used for `suspend()`/`resume()`, which may be called from any thread
///   (both take the task's work queue synchronously themselves; FoundationNetworking declares
///   `URLSessionTask` `Sendable`). The wake is never performed on the work queue itself (it would deadlock):
///   only ``wakeQueue`` performs it.
/// - Events hold non-`Sendable` Foundation values (`HTTPURLResponse`, `Data`, errors). Each is
///   created by the exchange, handed over under the lock, and never touched by the exchange
///   again; the work queue is the only reader afterwards. Ownership moves; nothing is shared.
/// - Continuations are resumed exactly once: they are removed from the state under the lock
///   before being resumed outside it.
final class LoadingBox: @unchecked Sendable {
    enum Phase {
        /// `startLoading` has not run yet.
        case idle
        /// The exchange runs; events may be pending.
        case loading
        /// A terminal event was delivered to the client.
        case done
        /// The session stopped the protocol (cancellation); the client is never called again.
        case stopped
    }

    /// Wakes are performed here, never on a work queue or a cooperative thread.
    private static let wakeQueue = DispatchQueue(label: "accessory-http.urlprotocol.wake")
    /// In streaming delivery, the exchange pauses reading while this many bytes wait.
    static let pendingLimit = 1024 * 1024

    private let lock = NSLock()
    private var phase = Phase.idle
    private var task: URLSessionTask?
    private var work: Task<Void, Never>?
    private var events: [LoadingEvent] = []
    private var pendingBytes = 0
    private var wakeRequested = false
    private var spaceWaiters: [CheckedContinuation<Void, Never>] = []
    private var lastActivity = ContinuousClock.now

    /// Moves from `.idle` to `.loading` and starts the exchange made by `makeWork`. Returns
    /// `false` (and starts nothing) when the protocol has already started.
    func start(task: URLSessionTask, _ makeWork: () -> Task<Void, Never>) -> Bool {
        self.lock.lock()
        defer { self.lock.unlock() }
        guard self.phase == .idle else { return false }
        self.phase = .loading
        self.task = task
        self.lastActivity = .now
        self.work = makeWork()
        return true
    }

    /// Marks the protocol as finished before it started (a failure reported at once).
    func finishBeforeStart() -> Bool {
        self.lock.lock()
        defer { self.lock.unlock() }
        guard self.phase == .idle else { return false }
        self.phase = .done
        return true
    }

    var currentPhase: Phase {
        self.lock.lock()
        defer { self.lock.unlock() }
        return self.phase
    }

    // MARK: Exchange side (any thread)

    /// Queues events for the client and asks for a wake if none is pending. Dropped once the
    /// protocol was stopped.
    func post(_ newEvents: [LoadingEvent]) {
        self.lock.lock()
        guard self.phase == .loading else {
            self.lock.unlock()
            return
        }
        for event in newEvents {
            if case .data(let data) = event { self.pendingBytes += data.count }
        }
        self.events.append(contentsOf: newEvents)
        let mustWake = !self.wakeRequested
        self.wakeRequested = true
        self.lastActivity = .now
        self.lock.unlock()
        if mustWake {
            Self.wakeQueue.async { self.performWake() }
        }
    }

    func post(_ event: LoadingEvent) { self.post([event]) }

    /// Records progress of the exchange, for the idle timeout.
    func touch() {
        self.lock.lock()
        self.lastActivity = .now
        self.lock.unlock()
    }

    var lastActivityInstant: ContinuousClock.Instant {
        self.lock.lock()
        defer { self.lock.unlock() }
        return self.lastActivity
    }

    /// Suspends while more than ``pendingLimit`` bytes wait for delivery (streaming back-pressure).
    func waitForSpace() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            self.lock.lock()
            if self.phase == .loading && self.pendingBytes > Self.pendingLimit {
                self.spaceWaiters.append(continuation)
                self.lock.unlock()
            } else {
                self.lock.unlock()
                continuation.resume()
            }
        }
    }

    private func performWake() {
        self.lock.lock()
        let task = self.phase == .loading ? self.task : nil
        self.lock.unlock()
        // Relies on FoundationNetworking: suspend() then resume() makes the session call
        // stopLoading() and then startLoading() on the task's work queue. On a task that is
        // cancelling or complete both are no-ops, and the events are simply dropped.
        task?.suspend()
        task?.resume()
    }

    // MARK: Work-queue side

    /// Hands the pending events to the protocol (inside `startLoading`), or `nil` when the
    /// protocol has stopped or is done.
    func takeEvents() -> [LoadingEvent]? {
        self.lock.lock()
        guard self.phase == .loading else {
            self.lock.unlock()
            return nil
        }
        self.wakeRequested = false
        let taken = self.events
        self.events = []
        self.pendingBytes = 0
        let waiters = self.spaceWaiters
        self.spaceWaiters = []
        self.lock.unlock()
        for waiter in waiters { waiter.resume() }
        return taken
    }

    /// Called after a terminal event was delivered: the client is never called again.
    func markDone() {
        self.lock.lock()
        if self.phase == .loading { self.phase = .done }
        self.task = nil
        self.work = nil
        self.events = []
        let waiters = self.spaceWaiters
        self.spaceWaiters = []
        self.lock.unlock()
        for waiter in waiters { waiter.resume() }
    }

    /// Called by `stopLoading` when the session cancels: the exchange is cancelled and nothing
    /// more is delivered.
    func stop() {
        self.lock.lock()
        if self.phase != .done { self.phase = .stopped }
        let work = self.work
        self.task = nil
        self.work = nil
        self.events = []
        let waiters = self.spaceWaiters
        self.spaceWaiters = []
        self.lock.unlock()
        for waiter in waiters { waiter.resume() }
        work?.cancel()
    }
}
