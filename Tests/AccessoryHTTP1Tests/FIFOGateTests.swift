import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import AccessoryHTTP1

@Suite("FIFOGate: one at a time, in order")
struct FIFOGateTests {
    /// The holder leaves on another thread while the next caller is on its way into the queue.
    /// A leave that fell between the caller's look at the gate and its joining the queue used to
    /// open the gate with nobody told: the caller then waited for ever (a redirect chain on one
    /// HTTP/1.1 link hung about once in 250 chains that way).
    @Test func aLeaveWhileACallerJoinsTheQueueLetsItThrough() async throws {
        let gate = FIFOGate()
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let rounds = 20_000
        for round in 0..<rounds {
            try await gate.enter()
            loop.execute { gate.leave() }
            let entered = try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    try await gate.enter()
                    return true
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(1))
                    return false
                }
                let first = try await group.next() ?? false
                group.cancelAll()
                return first
            }
            guard entered else {
                Issue.record(
                    "round \(round) of \(rounds): the gate was left, but the caller waiting for it never got in"
                )
                return
            }
            gate.leave()
        }
    }

    @Test func waitersGetThroughInTheOrderTheyCame() async throws {
        let gate = FIFOGate()
        try await gate.enter()
        let order = OrderLog()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<8 {
                group.addTask {
                    try await gate.enter()
                    order.append(index)
                    gate.leave()
                }
                // Each waiter is in the queue before the next one starts.
                while gate.waiting < index + 1 { await Task.yield() }
            }
            gate.leave()
            try await group.waitForAll()
        }
        #expect(order.values == Array(0..<8))
    }
}

private final class OrderLog: Sendable {
    private let state = Mutex<[Int]>([])
    func append(_ value: Int) { self.state.withLock { $0.append(value) } }
    var values: [Int] { self.state.withLock { $0 } }
}
