import AccessoryHTTP1
import NIOCore
import NIOHTTPTypes
import Synchronization

/// The last handler of a client stream's pipeline: it keeps the response parts of one read
/// together and hands them to the exchange as one batch, and it holds further reads (so the
/// stream's flow-control window, and the device) while a batch waits that is over the watermark.
///
/// Why not `NIOAsyncChannel`: its writer, its inbound sequence and their state machines cost a
/// `/status` exchange more than the stream itself did, and a bulk body a wake per DATA frame
/// (or, gathered, a copy of every byte). A batch is the parts of one read, without copies, and
/// one wake of the exchange per read at most.
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
///
/// Every method runs on the stream's event loop.
final class ResponseStreamHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPResponsePart
    // Outbound only for `read`: writes pass through.
    typealias OutboundIn = HTTPRequestPart
    typealias OutboundOut = HTTPRequestPart

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

    private let highWatermark: Int
    private let idleTimeout: Duration
    private var idleTimer: Scheduled<Void>?
    private let deadline: NIODeadline?
    private let deadlineExpiry: DeadlineExpiry?
    private var deadlineTimer: Scheduled<Void>?
    /// The response's end arrived: a deadline that passes after it no longer fails anything.
    private var responseEnded = false
    private var parts: [HTTPResponsePart] = []
    private var partBytes = 0
    private var ending: Ending?
    private var waiter: CheckedContinuation<Batch, any Error>?
    private var readHeld = false
    private var context: ChannelHandlerContext?

    /// - Parameters:
    ///   - highWatermark: body bytes held before reads stop until the exchange takes them.
    ///   - idleTimeout: how long a waiting exchange may receive nothing before it fails.
    ///   - deadline: when the exchange must be over, if it has a deadline; `expiry` records
    ///     that it passed, for the exchange's other waits (its request writes).
    init(highWatermark: Int, idleTimeout: Duration, deadline: NIODeadline? = nil, expiry: DeadlineExpiry? = nil) {
        self.highWatermark = highWatermark
        self.idleTimeout = idleTimeout
        self.deadline = deadline
        self.deadlineExpiry = expiry
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if let deadline = self.deadline {
            self.deadlineTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
                self.deadlinePassed()
            }
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        self.disarmIdleTimer()
        self.deadlineTimer?.cancel()
        self.deadlineTimer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = self.unwrapInboundIn(data)
        switch part {
        case .body(let bytes):
            guard bytes.readableBytes > 0 else { return }
            self.partBytes += bytes.readableBytes
        case .end:
            self.responseEnded = true
        case .head:
            break
        }
        self.parts.append(part)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.handOver()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if self.ending == nil { self.ending = .closed }
        self.handOver()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if self.ending == nil { self.ending = .failed(error) }
        self.handOver()
    }

    func read(context: ChannelHandlerContext) {
        if self.partBytes >= self.highWatermark {
            self.readHeld = true
        } else {
            context.read()
        }
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

    /// The exchange's task was cancelled: a waiting read ends with `CancellationError`, and the
    /// stream is reset (closing a stream channel that is still open sends RST_STREAM).
    func cancel() {
        self.disarmIdleTimer()
        if self.ending == nil { self.ending = .failed(CancellationError()) }
        if let waiter = self.waiter {
            self.waiter = nil
            waiter.resume(throwing: CancellationError())
        }
        self.context?.close(promise: nil)
    }

    private func handOver() {
        guard let waiter = self.waiter, !self.parts.isEmpty || self.ending != nil else { return }
        self.waiter = nil
        self.disarmIdleTimer()
        waiter.resume(returning: self.take())
    }

    /// Starts the silence bound of a wait: the exchange waits because nothing is there.
    private func armIdleTimer() {
        guard let context = self.context else { return }
        self.disarmIdleTimer()
        self.idleTimer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(self.idleTimeout)) {
            self.idleTimeoutFired()
        }
    }

    private func disarmIdleTimer() {
        self.idleTimer?.cancel()
        self.idleTimer = nil
    }

    /// The device sent nothing on this stream for the whole bound while the exchange waited:
    /// the wait fails and the stream is reset (closing an open stream channel sends RST_STREAM);
    /// the connection and its other streams go on.
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
        self.context?.close(promise: nil)
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
        self.context?.close(promise: nil)
    }

    private func take() -> Batch {
        let batch = Batch(parts: self.parts, ending: self.ending)
        self.parts = []
        self.partBytes = 0
        if self.readHeld, let context = self.context {
            self.readHeld = false
            context.read()
        }
        return batch
    }
}

@available(*, unavailable)
extension ResponseStreamHandler: Sendable {}

/// Whether an exchange's deadline passed, as its stream's handler saw it on the event loop: the
/// exchange reads it from its own executor to tell a write that failed because the stream was
/// reset at the deadline from one the device broke.
final class DeadlineExpiry: Sendable {
    private let passed = Atomic<Bool>(false)

    func record() { self.passed.store(true, ordering: .releasing) }

    var hasPassed: Bool { self.passed.load(ordering: .acquiring) }
}

/// Two reads of one stream at once: the exchange reads its response one call at a time.
struct HTTP2StreamMisuse: Error, CustomStringConvertible {
    var description: String { "a second read of an HTTP/2 response stream began while one waited" }
}
