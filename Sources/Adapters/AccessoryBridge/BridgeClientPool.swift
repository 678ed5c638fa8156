import AccessoryClient
import AccessoryTransport

/// The links the bridge carries exchanges on: one client per link, several when the device has
/// several interfaces that each carry one (a USB device with more than one qualifying interface,
/// the IPP-over-USB model). ``BridgeAdmission`` bounds how many exchanges run; this picks the
/// link for each: the one with the fewest exchanges under way, the first of equals, so a lone
/// request always takes the first link and the others open only under concurrency.
final class BridgeClientPool: Sendable {
    let clients: [AccessoryClient]
    private let active: TrackedMutex<[Int]>

    /// - Parameter clients: at least one.
    init(_ clients: [AccessoryClient]) {
        self.clients = clients
        self.active = TrackedMutex(Array(repeating: 0, count: clients.count))
    }

    /// The first client; the one a single-link bridge has.
    var first: AccessoryClient { self.clients[0] }

    /// Runs `body` with the least busy client, counted as busy meanwhile.
    func withClient<Result>(_ body: (AccessoryClient) async throws -> Result) async rethrows -> Result {
        let index = self.active.withLock { counts -> Int in
            var best = 0
            for index in counts.indices where counts[index] < counts[best] { best = index }
            counts[best] += 1
            return best
        }
        defer { self.active.withLock { $0[index] -= 1 } }
        return try await body(self.clients[index])
    }
}
