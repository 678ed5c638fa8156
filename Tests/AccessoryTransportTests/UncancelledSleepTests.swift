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
