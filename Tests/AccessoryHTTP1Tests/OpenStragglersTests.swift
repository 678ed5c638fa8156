import AccessoryTransport
import Testing

@testable import AccessoryHTTP1

/// The link's shutdown waits for opens that timed out, but no longer than it says.
struct OpenStragglersTests {
    @Test func theWaitEndsAtItsBoundWhenAnOpenRunsOn() async {
        let stragglers = OpenStragglers()
        let stubborn = Task { await sleepUncancelled(for: .seconds(5)) }
        stragglers.track(stubborn)
        let clock = ContinuousClock()
        let started = clock.now
        await stragglers.waitForAll(atMost: .milliseconds(200))
        let took = clock.now - started
        #expect(took < .seconds(2), "waited \(took) for a bound of 200 ms")
        #expect(stragglers.count == 1)
    }

    @Test func anOpenThatEndsIsForgotten() async throws {
        let stragglers = OpenStragglers()
        stragglers.track(Task {})
        let clock = ContinuousClock()
        let started = clock.now
        while stragglers.count > 0 && clock.now - started < .seconds(5) {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(stragglers.count == 0)
    }
}
