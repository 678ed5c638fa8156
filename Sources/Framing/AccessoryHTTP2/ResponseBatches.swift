import AccessoryHTTP1
import NIOCore
import NIOHTTPTypes
import Synchronization

/// What a client stream holds of its response for the exchange, on the stream's event loop: the
/// parts of one read kept together and handed over as one batch, without copies, with one wake of
/// the exchange per read at most. Both kinds of client stream keep one: a frame-level stream
/// (``HTTP2ClientStreams``) and a stream channel's ``ResponseStreamHandler``.
///
/// While the exchange waits and nothing arrives for the link's `idleTimeout`, the wait ends with
/// `HTTPLinkError` `idle-timeout` and the stream is reset, as an HTTP/1.1 link ends a silent
/// device's exchange: a device that never answers one stream cannot hold its caller forever.
///
/// When the exchange has a deadline, the stream ends there (unless its response already
/// ended): a waiting read fails with `HTTPLinkError` `exchange-timeout`, later reads fail the
/// same way, and the stream is reset. A timer on the event loop does this, rather than a task
/// that races the exchange: two child tasks and a sleep per request cost an HTTP/2 `/status`
/// a quarter of its rate.
final class ResponseBatches {
    /// What the exchange receives: the parts that arrived since its last batch, then how the
    /// stream ended, if it did.
    struct Batch: Sendable {
        var parts: [HTTPResponsePart]
        var ending: Ending?
    }

    enum Ending: Sendable {
        /// The stream closed (after the response's end, or not: the reader tells).
        case closed
        case failed(any Error)
    }

    /// What the batches ask of the stream that holds them.
    protocol Owner: AnyObject {
        /// The exchange gave up on the stream (cancelled, idle, past its deadline): reset it.
        func resetStream()
        /// The exchange took `count` body bytes: the stream may read (or credit) that much more.
        func bodyBytesTaken(_ count: Int)
        /// The exchange's wait ended at the idle bound (the stream is reset already): the
        /// connection may be silent as a whole.
        func waitTimedOut()
    }

    weak var owner: (any Owner)?
    /// Whether the whole response arrived, for the exchange's request writes on any thread.
    let arrival = ResponseArrival()
    private let eventLoop: any EventLoop
    let idleTimeout: Duration
    private var idleTimer: Scheduled<Void>?
    private let deadlineExpiry: DeadlineExpiry?
    private var deadlineTimer: Scheduled<Void>?
    /// The response's end arrived: a deadline that passes after it no longer fails anything.
    private(set) var responseEnded = false
    private var parts: [HTTPResponsePart] = []
    /// Whether body parts are gathered into buffers of the connection's at the end of each read
    /// (``gatherBody(using:)``): for an exchange on another executor, which holds them across
    /// reads.
    var gathersBody = false
    /// The parts before this index are gathered already.
    private var gathered = 0
    /// Body bytes held for the exchange.
    private(set) var heldBytes = 0
    private(set) var ending: Ending?
    private var waiter: CheckedContinuation<Batch, any Error>?

    /// Must be made on `eventLoop`; the deadline's timer starts now.
    ///
    /// - Parameters:
    ///   - idleTimeout: how long a waiting exchange may receive nothing before it fails.
    ///   - deadline: when the exchange must be over, if it has a deadline, and where to record
    ///     that it passed, for the exchange's other waits (its request writes).
    init(eventLoop: any EventLoop, idleTimeout: Duration, deadline: StreamDeadline?) {
        self.eventLoop = eventLoop
        self.idleTimeout = idleTimeout
        self.deadlineExpiry = deadline?.expiry
        if let deadline {
            self.deadlineTimer = eventLoop.assumeIsolated().scheduleTask(deadline: deadline.at) {
                self.deadlinePassed()
            }
        }
    }

    /// The stream is gone: its timers stop.
    func stop() {
        self.disarmIdleTimer()
        self.deadlineTimer?.cancel()
        self.deadlineTimer = nil
    }

    /// A part that arrived; handed over at ``handOver()``.
    func append(_ part: HTTPResponsePart) {
        switch part {
        case .body(let bytes):
            guard bytes.readableBytes > 0 else { return }
            self.heldBytes += bytes.readableBytes
        case .end:
            self.responseEnded = true
            self.arrival.recordWhole()
        case .head:
            break
        }
        self.parts.append(part)
    }

    /// Gathers the body parts that arrived in this read into buffers of `pool` (a run of body
    /// parts into one), releasing the read's storage; at the end of a read, before
    /// ``handOver()``.
    func gatherBody(using pool: inout BodyBufferPool) {
        guard self.gathersBody else { return }
        var index = self.gathered
        while index < self.parts.count {
            guard case .body(let first) = self.parts[index] else {
                index += 1
                continue
            }
            var end = index + 1
            var totalBytes = first.readableBytes
            while end < self.parts.count, case .body(let next) = self.parts[end] {
                totalBytes += next.readableBytes
                end += 1
            }
            // The run's view of `parts` ends with this statement, so the replacement below
            // finds the array unshared and edits it in place.
            let gathered = pool.gather(
                self.parts[index..<end].lazy.compactMap { part -> ByteBuffer? in
                    if case .body(let bytes) = part { bytes } else { nil }
                },
                totalBytes: totalBytes
            )
            self.parts.replaceSubrange(index..<end, with: CollectionOfOne(.body(gathered)))
            index += 1
        }
        self.gathered = self.parts.count
    }

    /// How the stream ended (the first ending counts), handed over at once.
    func end(_ ending: Ending) {
        if self.ending == nil { self.ending = ending }
        self.handOver()
    }

    /// Wakes a waiting exchange with what arrived (at the end of a read).
    func handOver() {
        guard let waiter = self.waiter, !self.parts.isEmpty || self.ending != nil else { return }
        self.waiter = nil
        self.disarmIdleTimer()
        waiter.resume(returning: self.take())
    }

    /// What has arrived, at once when there is something (or the stream ended); otherwise
    /// `nil`, and the caller waits with ``wait(_:)``.
    func takeReady() -> Batch? {
        guard !self.parts.isEmpty || self.ending != nil else { return nil }
        return self.take()
    }

    /// Resumes `continuation` with the next batch, now or when one is there.
    func wait(_ continuation: CheckedContinuation<Batch, any Error>) {
        if let batch = self.takeReady() {
            continuation.resume(returning: batch)
        } else if self.waiter != nil {
            continuation.resume(throwing: HTTP2StreamMisuse())
        } else {
            self.waiter = continuation
            self.armIdleTimer()
        }
    }

    /// The request moved on (a part of its body left): a silence bound that runs starts again.
    /// A response is not due while the device is still taking the request, however slowly.
    func requestProgressed() {
        guard self.idleTimer != nil else { return }
        self.armIdleTimer()
    }

    /// Completes `bounded` when `written` (a request write the exchange waits for) completes,
    /// unless the device takes none of it for the idle bound: then `bounded` fails with
    /// `HTTPLinkError` `idle-timeout` and the stream is reset. A device that stops taking a
    /// streamed upload holds flow control shut, and nothing else would end that wait.
    func boundRequestWrite(_ written: EventLoopFuture<Void>, reporting bounded: EventLoopPromise<Void>) {
        var settled = false
        let idleTimeout = self.idleTimeout
        let timer = self.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(idleTimeout)) {
            guard !settled else { return }
            settled = true
            let error = HTTPLinkError(
                .idleTimeout,
                "the device took none of the request body on its HTTP/2 stream for \(idleTimeout)"
            )
            if self.ending == nil { self.ending = .failed(error) }
            bounded.fail(error)
            // A read of the response waiting beside the write ends now too: the reset removes
            // the stream, and no end of it follows to wake that read.
            self.handOver()
            self.owner?.resetStream()
        }
        written.assumeIsolated().whenComplete { result in
            timer.cancel()
            guard !settled else { return }
            settled = true
            bounded.completeWith(result)
        }
    }

    /// The exchange's task was cancelled: a waiting read ends with `CancellationError`, and the
    /// stream is reset.
    func cancel() {
        self.disarmIdleTimer()
        if self.ending == nil { self.ending = .failed(CancellationError()) }
        if let waiter = self.waiter {
            self.waiter = nil
            waiter.resume(throwing: CancellationError())
        }
        self.owner?.resetStream()
    }

    /// Starts the silence bound of a wait: the exchange waits because nothing is there.
    private func armIdleTimer() {
        self.disarmIdleTimer()
        self.idleTimer = self.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(self.idleTimeout)) {
            self.idleTimeoutFired()
        }
    }

    private func disarmIdleTimer() {
        self.idleTimer?.cancel()
        self.idleTimer = nil
    }

    /// The device sent nothing on this stream for the whole bound while the exchange waited:
    /// the wait fails and the stream is reset; the connection and its other streams go on.
    private func idleTimeoutFired() {
        self.idleTimer = nil
        guard let waiter = self.waiter else { return }
        self.waiter = nil
        let error = HTTPLinkError(
            .idleTimeout,
            "the device sent nothing on its HTTP/2 stream for \(self.idleTimeout) while a response was due"
        )
        if self.ending == nil { self.ending = .failed(error) }
        waiter.resume(throwing: error)
        self.owner?.resetStream()
        self.owner?.waitTimedOut()
    }

    /// The exchange's deadline passed before its response ended: what waits fails, what reads
    /// next fails, and the stream is reset; the connection and its other streams go on.
    private func deadlinePassed() {
        self.deadlineTimer = nil
        guard self.ending == nil, !self.responseEnded else { return }
        self.deadlineExpiry?.record()
        self.disarmIdleTimer()
        let error = HTTPLinkError(
            .exchangeTimeout,
            "the exchange took longer than its deadline; its HTTP/2 stream was reset"
        )
        self.ending = .failed(error)
        if let waiter = self.waiter {
            self.waiter = nil
            waiter.resume(throwing: error)
        }
        self.owner?.resetStream()
    }

    private func take() -> Batch {
        let batch = Batch(parts: self.parts, ending: self.ending)
        let taken = self.heldBytes
        self.parts = []
        self.gathered = 0
        self.heldBytes = 0
        if taken > 0 { self.owner?.bodyBytesTaken(taken) }
        return batch
    }
}

@available(*, unavailable)
extension ResponseBatches: Sendable {}

/// Whether an exchange's deadline passed, as its stream saw it on the event loop: the exchange
/// reads it from its own executor to tell a write that failed because the stream was reset at
/// the deadline from one the device broke.
final class DeadlineExpiry: Sendable {
    private let passed = Atomic<Bool>(false)

    func record() { self.passed.store(true, ordering: .releasing) }

    var hasPassed: Bool { self.passed.load(ordering: .acquiring) }
}

/// Two reads of one stream at once: the exchange reads its response one call at a time.
struct HTTP2StreamMisuse: Error, CustomStringConvertible {
    var description: String { "a second read of an HTTP/2 response stream began while one waited" }
}

/// Whether a stream's whole response arrived, readable from any thread. A request write that
/// fails after it is the device having answered before the request's end and stopped taking the
/// rest (RFC 9113 §8.1: its RST_STREAM after a complete response; NO_ERROR asks for exactly
/// that): the request body ends quietly there and the exchange gets the answer. Recorded on the
/// event loop as the end arrives, before the device's reset can fail a write.
final class ResponseArrival: Sendable {
    private let whole = Atomic<Bool>(false)

    func recordWhole() { self.whole.store(true, ordering: .releasing) }

    var isWhole: Bool { self.whole.load(ordering: .acquiring) }
}
