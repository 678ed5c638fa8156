import NIOCore

/// The idle timeout's rule, free of I/O: while a response is due, the device must show it is
/// alive at least every `idleTimeout`, by sending something or by taking more of the request
/// body (a device that writes a large upload to flash slowly is working, not silent).
///
/// The handler looks at least once per ``period``. A look that comes much later than planned
/// means the event loop itself was held up (a consumer on the link's executor that blocked,
/// say), and bytes the device sent meanwhile could not be read, so that time is not counted as
/// the device's silence. One watch runs per link; scheduling and cancelling a timer per
/// exchange would cost more than a look that finds nothing to do.
struct IdleWatch {
    let idleTimeout: TimeAmount
    /// When the device last sent something or took request bytes (or the wait for it began).
    private(set) var lastInput: NIODeadline

    init(idleTimeout: TimeAmount, now: NIODeadline) {
        self.idleTimeout = idleTimeout
        self.lastInput = now
    }

    /// The longest gap between two looks.
    var period: TimeAmount { min(self.idleTimeout, .seconds(1)) }

    enum Verdict: Equatable {
        /// The device has been silent too long while bytes were wanted.
        case timedOut
        /// Look again at this time.
        case lookAgainAt(NIODeadline)
    }

    mutating func inputArrived(now: NIODeadline) {
        self.lastInput = now
    }

    /// A write of the request reached the line: the device took what came before it.
    mutating func requestBytesTaken(now: NIODeadline) {
        self.lastInput = now
    }

    /// When to look first after a wait for the device began at `now`.
    func firstLook(now: NIODeadline) -> NIODeadline {
        min(self.lastInput + self.idleTimeout, now + self.period)
    }

    /// A look planned for `planned` runs at `now`. `waitingOnDevice`: a read is pending and
    /// the link wants bytes (silence then is the device's).
    mutating func look(planned: NIODeadline, now: NIODeadline, waitingOnDevice: Bool) -> Verdict {
        let loopWasHeldUp = now - planned > self.period
        if waitingOnDevice && !loopWasHeldUp && now - self.lastInput >= self.idleTimeout {
            return .timedOut
        }
        if !waitingOnDevice || loopWasHeldUp { self.lastInput = now }
        return .lookAgainAt(min(self.lastInput + self.idleTimeout, now + self.period))
    }
}

/// The settling rule, free of I/O: after a reopen, stale input is discarded until the line
/// has been quiet for `quietPeriod`, or `maxDuration` has passed (a device that never stops
/// talking must not keep the link from being used).
struct SettleWatch {
    let quietPeriod: TimeAmount
    let maxDuration: TimeAmount
    let started: NIODeadline
    private(set) var lastInput: NIODeadline
    private(set) var discarded = 0

    init(quietPeriod: TimeAmount, maxDuration: TimeAmount, now: NIODeadline) {
        self.quietPeriod = quietPeriod
        self.maxDuration = maxDuration
        self.started = now
        self.lastInput = now
    }

    enum Verdict: Equatable {
        /// Settled; this many stale bytes were discarded.
        case settled(discarded: Int)
        case lookAgainAt(NIODeadline)
    }

    mutating func inputDiscarded(byteCount: Int, now: NIODeadline) {
        self.discarded += byteCount
        self.lastInput = now
    }

    func look(now: NIODeadline) -> Verdict {
        let quietUntil = self.lastInput + self.quietPeriod
        let giveUpAt = self.started + self.maxDuration
        if now >= quietUntil || now >= giveUpAt { return .settled(discarded: self.discarded) }
        return .lookAgainAt(min(quietUntil, giveUpAt))
    }
}
