import AccessoryTransport
import NIOCore
import Synchronization

/// Runs `operation` (an open or a renewal), giving up after `timeout` (the error's message
/// ends with `timeoutNote()`, if any: what the operation was still waiting for) or when the caller is
/// cancelled — even if the operation ignores cancellation (a blocking `open(2)` on a stuck
/// tty, say): the race is unstructured, and a result that comes after the caller gave up is
/// discarded.
///
/// Shared by the HTTP/1.1 and HTTP/2 links. Only a link's shutdown cancels an open (it runs in a task of its own), and a shutdown
/// must not leave behind what the open makes (an `exec:` child, a claimed interface): a
/// cancelled race cancels the operation too and waits up to ``openCancelledGrace`` for it to
/// end, its result closed and released. An operation that ignores cancellation is left to
/// end on its own, as before. A race that times out fails at once (the open timeout is a
/// deadline the caller set) and leaves the cancelled operation to `stragglers`, which the
/// link's shutdown waits for.
package func raceOpen<Output: Sendable>(
    _ what: String,
    timeout: Duration,
    stragglers: OpenStragglers,
    cancelled: String,
    timeoutNote: @escaping @Sendable () -> String? = { nil },
    discard: @escaping @Sendable (Output) async -> Void,
    _ operation: @escaping @Sendable () async throws -> Output
) async throws -> Output {
    // A shutdown's cancellation that came first: nothing is started that it would then wait for.
    if Task.isCancelled { throw HTTPLinkError(.cancelled, cancelled) }
    let outcome = OpenOutcome<Output>()
    let opening = Task {
        do {
            let opened = try await operation()
            if !outcome.resume(with: .success(opened)) { await discard(opened) }
        } catch {
            outcome.resume(with: .failure(error))
        }
    }
    let timer = Task {
        try await Task.sleep(for: timeout)
        // Tracked before the caller hears of the timeout: a shutdown it makes right after must
        // find the open to wait for.
        let note = timeoutNote().map { ": \($0)" } ?? ""
        outcome.resume(with: .failure(HTTPLinkError(.openTimeout, "\(what) took longer than \(timeout)\(note)"))) {
            opening.cancel()
            stragglers.track(opening)
        }
    }
    outcome.onFinish { timer.cancel() }
    let wasCancelled = Atomic<Bool>(false)
    do {
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Output, any Error>) in
                outcome.install(continuation)
            }
        } onCancel: {
            if outcome.resume(with: .failure(HTTPLinkError(.cancelled, cancelled))) {
                wasCancelled.store(true, ordering: .relaxed)
                opening.cancel()
            }
        }
    } catch {
        if wasCancelled.load(ordering: .relaxed) {
            await waitForTasks([opening], atMost: openCancelledGrace)
        }
        throw error
    }
}

/// How long a cancelled open is waited for (see ``raceOpen(_:timeout:stragglers:cancelled:timeoutNote:discard:_:)``).
package let openCancelledGrace: Duration = .seconds(2)

/// Waits for `opening` until `deadline` or the caller's cancellation, whichever comes first
/// (failing with `exchange-timeout` and `expired`, or `cancelled`); `opening` goes on either way,
/// unlike `opening.value`, which a cancelled caller would still wait out. Its own failure is
/// the caller's. Shared by the HTTP/1.1 and HTTP/2 links, whose opens outlive the request that
/// started them.
package func waitForOpen<Output: Sendable>(
    _ opening: Task<Output, any Error>,
    until deadline: NIODeadline?,
    expired: @autoclosure () -> String = "",
    cancelled: String
) async throws -> Output {
    let outcome = OpenOutcome<Output>()
    let expiredError = HTTPLinkError(.exchangeTimeout, expired())
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Output, any Error>) in
            outcome.install(continuation)
            Task { outcome.resume(with: await opening.result) }
            guard let deadline else { return }
            let timer = Task {
                try await Task.sleep(for: .nanoseconds(max(0, (deadline - .now()).nanoseconds)))
                outcome.resume(with: .failure(expiredError))
            }
            outcome.onFinish { timer.cancel() }
        }
    } onCancel: {
        outcome.resume(with: .failure(HTTPLinkError(.cancelled, cancelled)))
    }
}

/// The first of "opened", "failed", "timed out" and "cancelled" wins; the others are ignored.
final class OpenOutcome<Value: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Value, any Error>?
        var early: Result<Value, any Error>?
        var done = false
        var onFinish: (@Sendable () -> Void)?
    }

    private let state = TrackedMutex(State())

    func install(_ continuation: CheckedContinuation<Value, any Error>) {
        let early: Result<Value, any Error>? = self.state.withLock { state in
            if let early = state.early { return early }
            state.continuation = continuation
            return nil
        }
        if let early { continuation.resume(with: early) }
    }

    func onFinish(_ body: @escaping @Sendable () -> Void) {
        let runNow: Bool = self.state.withLock { state in
            if state.done && state.continuation == nil { return true }
            state.onFinish = body
            return false
        }
        if runNow { body() }
    }

    /// Returns whether this result won; if it did, `whenWon` runs before the waiter resumes.
    @discardableResult
    func resume(with result: Result<Value, any Error>, whenWon: () -> Void = {}) -> Bool {
        let (didWin, continuation, finish): (Bool, CheckedContinuation<Value, any Error>?, (@Sendable () -> Void)?) =
            self.state.withLock { state in
                guard !state.done else { return (false, nil, nil) }
                state.done = true
                if state.continuation == nil { state.early = result }
                defer { state.continuation = nil }
                return (true, state.continuation, state.onFinish)
            }
        if didWin { whenWon() }
        continuation?.resume(with: result)
        finish?()
        return didWin
    }
}

/// The wait, before an open, for the streams closed before to let go of the device
/// (`ByteStreamTransport.reopenWaitsForRelease`: a USB interface is released by the bridge's
/// thread after its last transfer is back). It runs inside the open's race, so the open timeout
/// bounds it, and says so when that timeout ends it.
package final class ReleaseWait: Sendable {
    private let streams: [OpenedByteStream]
    private let finishedFlag = SharedFlag()

    package init(_ streams: [OpenedByteStream]) {
        self.streams = streams
    }

    /// Waits until every stream has been released, or the calling task is cancelled (its race
    /// was given up: the open timeout, a shutdown); the release itself is not the caller's to
    /// stop, and goes on.
    package func run() async {
        if self.streams.isEmpty { return }
        let done = ReleaseSignal()
        let streams = self.streams
        let finished = self.finishedFlag
        Task {
            for stream in streams { await stream.waitUntilReleased() }
            finished.set()
            done.fire()
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { done.install($0) }
        } onCancel: {
            done.fire()
        }
    }

    /// For the open timeout's message: what the open was still waiting for, if this.
    package var note: String? {
        if self.streams.isEmpty || self.finishedFlag.isSet { return nil }
        return "the stream closed before had not yet let go of the device (a transfer it started never came back)"
    }
}

/// A flag shared with the task that waits for the releases.
private final class SharedFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { self.value.load(ordering: .acquiring) }
    func set() { self.value.store(true, ordering: .releasing) }
}

/// Resumes one waiter once, at whichever comes first: the releases or the cancellation.
private final class ReleaseSignal: Sendable {
    private let state = Mutex<(waiter: CheckedContinuation<Void, Never>?, fired: Bool)>((nil, false))

    func install(_ waiter: CheckedContinuation<Void, Never>) {
        let resumeNow = self.state.withLock { state -> Bool in
            if state.fired { return true }
            state.waiter = waiter
            return false
        }
        if resumeNow { waiter.resume() }
    }

    func fire() {
        let waiter = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.fired { return nil }
            state.fired = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }
}
