import AccessoryTransport
import Foundation
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// An in-memory, least-recently-used store for responses of accessory routes.
///
/// FoundationNetworking's `URLCache` is not used: it ignores the query string in its key, and
/// its memory eviction traps (`URLCache.evictFromMemoryCacheAssumingLockHeld`) once the
/// capacity is exceeded, which concurrent loads reach quickly. Entries live in memory only,
/// whatever their storage policy allows.
public final class AccessoryResponseCache: Sendable {
    struct Entry: @unchecked Sendable {
        // `@unchecked Sendable`: `HTTPURLResponse` is immutable once made; `Data` is a value.
        let response: HTTPURLResponse
        let data: Data
        let storedAt: Date
        var lastUse: UInt64
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var size = 0
        var clock: UInt64 = 0
    }

    /// The most body bytes kept; least recently used entries are dropped beyond it.
    public let capacity: Int
    private let state = TrackedMutex(State())

    /// Creates an empty cache holding at most `capacity` body bytes.
    public init(capacity: Int = 16 * 1024 * 1024) {
        self.capacity = capacity
    }

    /// Drops every entry.
    public func removeAll() {
        self.state.withLock { $0 = State() }
    }

    func lookup(_ url: URL) -> Entry? {
        self.state.withLock { state in
            state.clock += 1
            state.entries[url.absoluteString]?.lastUse = state.clock
            return state.entries[url.absoluteString]
        }
    }

    func store(_ response: HTTPURLResponse, data: Data, for url: URL, at date: Date = Date()) {
        guard data.count <= self.capacity else { return }
        let key = url.absoluteString
        self.state.withLock { state in
            state.clock += 1
            if let old = state.entries.removeValue(forKey: key) { state.size -= old.data.count }
            state.entries[key] = Entry(response: response, data: data, storedAt: date, lastUse: state.clock)
            state.size += data.count
            while state.size > self.capacity,
                let oldest = state.entries.min(by: { $0.value.lastUse < $1.value.lastUse })
            {
                state.entries[oldest.key] = nil
                state.size -= oldest.value.data.count
            }
        }
    }
}
