import AccessoryTransport
import Testing

/// The polls of a cleanup (a child's exit, a shutdown's grace) wait in a cancelled task too,
/// instead of spinning.
struct UncancelledSleepTests {
    @Test func sleepsInACancelledTask() async {
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            let clock = ContinuousClock()
            let started = clock.now
            let plainSleepFailed = (try? await Task.sleep(for: .milliseconds(100))) == nil
            let plain = clock.now - started
            for _ in 0..<10 { await sleepUncancelled(for: .milliseconds(20)) }
            return (plainSleepFailed, plain, clock.now - started - plain)
        }
        let (plainSleepFailed, plain, uncancelled) = await task.value
        #expect(
            plainSleepFailed && plain < .milliseconds(100),
            "the task was not cancelled: Task.sleep waited \(plain)"
        )
        #expect(uncancelled >= .milliseconds(200), "ten 20 ms sleeps took \(uncancelled)")
    }
}

/// `waitForTasks(_:atMost:)`: the bound holds whatever the tasks and the caller do.
struct BoundedWaitTests {
    @Test func aTaskThatRunsOnIsWaitedForOnlyUntilTheBound() async {
        let stubborn = Task { await sleepUncancelled(for: .seconds(5)) }
        defer { stubborn.cancel() }
        let clock = ContinuousClock()
        let started = clock.now
        await waitForTasks([stubborn], atMost: .milliseconds(200))
        let took = clock.now - started
        #expect(took >= .milliseconds(190) && took < .seconds(2), "waited \(took)")
    }

    @Test func aCancelledCallerStillWaitsUntilTheTasksEndOrTheBound() async {
        let short = Task { await sleepUncancelled(for: .milliseconds(150)) }
        let waiter = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            let clock = ContinuousClock()
            let started = clock.now
            await waitForTasks([short], atMost: .seconds(5))
            return clock.now - started
        }
        let took = await waiter.value
        #expect(took >= .milliseconds(140) && took < .seconds(2), "waited \(took)")
    }
}
