import AccessoryTransport
import Synchronization

/// Asks a responder's links to end gracefully: an HTTP/2 connection sends GOAWAY (RFC 9113
/// §6.8), takes no new stream and closes once the streams under way are answered. Not a
/// cancellation: cancelling the task that serves ends everything at once (as a new session's
/// HELLO must).
///
/// Shared by every copy of the ``HTTPResponder`` that made it.
public final class ResponderShutdown: Sendable {
    private struct State {
        var begun = false
        var nextKey = 0
        var actions: [Int: @Sendable () -> Void] = [:]
    }

    private let state = Mutex(State())
    /// Links being served now, by every copy of the responder.
    private let links = Atomic<Int>(0)

    /// A shutdown that has not begun.
    public init() {}

    /// Whether ``begin()`` was called.
    public var hasBegun: Bool { self.state.withLock { $0.begun } }

    /// Begins the shutdown: every link served now, and every one served later, ends gracefully.
    /// Only the first call counts.
    public func begin() {
        let actions = self.state.withLock { state -> [@Sendable () -> Void] in
            guard !state.begun else { return [] }
            state.begun = true
            defer { state.actions = [:] }
            return Array(state.actions.values)
        }
        for action in actions { action() }
    }

    /// Returns once no link is being served (at once if none is), or after `bound`: what a
    /// program that begins a shutdown waits for before it cancels what is left. `true` if the
    /// links ended.
    public func linksEnded(within bound: Duration) async -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + bound
        while self.links.load(ordering: .relaxed) > 0 {
            guard clock.now < deadline else { return false }
            await sleepUncancelled(for: .milliseconds(20))  // a cancelled caller must not spin
        }
        return true
    }

    /// A link is being served (until ``linkEnded()``).
    func linkStarted() {
        self.links.add(1, ordering: .relaxed)
    }

    /// A link that ``linkStarted()`` ended.
    func linkEnded() {
        self.links.subtract(1, ordering: .relaxed)
    }

    /// Runs `action` when the shutdown begins (at once if it has); returns the key that
    /// ``forget(_:)`` takes, or `nil` when it ran at once.
    func onBegin(_ action: @escaping @Sendable () -> Void) -> Int? {
        let key = self.state.withLock { state -> Int? in
            guard !state.begun else { return nil }
            let key = state.nextKey
            state.nextKey += 1
            state.actions[key] = action
            return key
        }
        if key == nil { action() }
        return key
    }

    /// The link ended on its own: its action is not needed any more.
    func forget(_ key: Int?) {
        guard let key else { return }
        _ = self.state.withLock { $0.actions.removeValue(forKey: key) }
    }
}
