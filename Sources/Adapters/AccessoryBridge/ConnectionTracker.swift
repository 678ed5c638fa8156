import AccessoryTransport
import NIOCore
import Synchronization

/// The open client connections, for shutdown: idle ones are closed at once, busy ones after
/// their exchange (or when the grace period ends).
final class ConnectionTracker: Sendable {
    private struct Entry {
        let channel: any Channel
        var busy = false
    }

    private struct State {
        var entries: [Int: Entry] = [:]
        var nextID = 0
        var draining = false
    }

    private let state = TrackedMutex(State())

    var count: Int { self.state.withLock { $0.entries.count } }

    /// Registers a new connection; nil when the bridge is shutting down (close it).
    func add(_ channel: any Channel) -> Int? {
        self.state.withLock { state in
            guard !state.draining else { return nil }
            state.nextID += 1
            state.entries[state.nextID] = Entry(channel: channel)
            return state.nextID
        }
    }

    func remove(_ id: Int) {
        _ = self.state.withLock { $0.entries.removeValue(forKey: id) }
    }

    /// An exchange starts; false when the bridge is shutting down.
    func begin(_ id: Int) -> Bool {
        self.state.withLock { state in
            guard !state.draining else { return false }
            state.entries[id]?.busy = true
            return true
        }
    }

    /// An exchange ended; false when the bridge is shutting down (close the connection).
    func end(_ id: Int) -> Bool {
        self.state.withLock { state in
            state.entries[id]?.busy = false
            return !state.draining
        }
    }

    /// Stops new exchanges and closes the idle connections.
    func drain() {
        let idle = self.state.withLock { state -> [any Channel] in
            state.draining = true
            return state.entries.values.filter { !$0.busy }.map(\.channel)
        }
        for channel in idle { channel.close(promise: nil) }
    }

    /// Closes every connection still open.
    func closeAll() {
        let all = self.state.withLock { $0.entries.values.map(\.channel) }
        for channel in all { channel.close(promise: nil) }
    }
}
