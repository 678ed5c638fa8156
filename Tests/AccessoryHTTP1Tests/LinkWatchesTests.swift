import NIOCore
import Testing

@testable import AccessoryHTTP1

/// The idle and settle rules with an injected clock.
@Suite struct LinkWatchesTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test func silenceWhileWaitingTimesOut() {
        var watch = IdleWatch(idleTimeout: .seconds(3), now: t0)
        #expect(watch.firstLook(now: t0) == t0 + .seconds(1))
        var planned = t0 + .seconds(1)
        for _ in 0..<2 {
            guard case .lookAgainAt(let next) = watch.look(planned: planned, now: planned, waitingOnDevice: true)
            else {
                Issue.record("timed out early")
                return
            }
            planned = next
        }
        #expect(planned == t0 + .seconds(3))
        #expect(watch.look(planned: planned, now: planned, waitingOnDevice: true) == .timedOut)
    }

    @Test func inputRestartsTheWait() {
        var watch = IdleWatch(idleTimeout: .seconds(2), now: t0)
        watch.inputArrived(now: t0 + .milliseconds(1500))
        #expect(
            watch.look(planned: t0 + .seconds(2), now: t0 + .seconds(2), waitingOnDevice: true)
                == .lookAgainAt(t0 + .milliseconds(3000))
        )
        #expect(
            watch.look(planned: t0 + .seconds(3), now: t0 + .milliseconds(3500), waitingOnDevice: true) == .timedOut
        )
    }

    @Test func notWaitingOnTheDeviceIsNotSilence() {
        // The consumer is full (no read pending): the device is not to blame.
        var watch = IdleWatch(idleTimeout: .seconds(1), now: t0)
        let later = t0 + .seconds(5)
        #expect(watch.look(planned: later, now: later, waitingOnDevice: false) == .lookAgainAt(later + .seconds(1)))
        #expect(watch.lastInput == later)
    }

    @Test func aHeldUpEventLoopIsNotTheDevicesSilence() {
        // The look was planned for t0+1s but ran 10 s late: bytes could not have been read.
        var watch = IdleWatch(idleTimeout: .seconds(1), now: t0)
        let late = t0 + .seconds(11)
        #expect(
            watch.look(planned: t0 + .seconds(1), now: late, waitingOnDevice: true) == .lookAgainAt(late + .seconds(1))
        )
        // A look on time after that, with no input, does time out.
        #expect(watch.look(planned: late + .seconds(1), now: late + .seconds(1), waitingOnDevice: true) == .timedOut)
    }

    @Test func settlesAfterAQuietPeriod() {
        var watch = SettleWatch(quietPeriod: .milliseconds(100), maxDuration: .seconds(3), now: t0)
        #expect(watch.look(now: t0 + .milliseconds(50)) == .lookAgainAt(t0 + .milliseconds(100)))
        watch.inputDiscarded(byteCount: 7, now: t0 + .milliseconds(80))
        #expect(watch.look(now: t0 + .milliseconds(100)) == .lookAgainAt(t0 + .milliseconds(180)))
        watch.inputDiscarded(byteCount: 5, now: t0 + .milliseconds(150))
        #expect(watch.look(now: t0 + .milliseconds(250)) == .settled(discarded: 12))
    }

    @Test func aDeviceThatNeverStopsTalkingIsCutOffAtTheMaximum() {
        var watch = SettleWatch(quietPeriod: .milliseconds(100), maxDuration: .seconds(1), now: t0)
        var now = t0
        while now < t0 + .milliseconds(950) {
            now = now + .milliseconds(50)
            watch.inputDiscarded(byteCount: 1, now: now)
        }
        #expect(watch.look(now: now) == .lookAgainAt(t0 + .seconds(1)))
        #expect(watch.look(now: t0 + .seconds(1)) == .settled(discarded: 19))
    }
}
