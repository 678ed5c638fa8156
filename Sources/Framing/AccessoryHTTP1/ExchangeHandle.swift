import HTTPTypes
import NIOCore
import Synchronization

typealias ResponseBodyProducer = NIOThrowingAsyncSequenceProducer<
    ByteBuffer, any Error, NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark, ResponseBodyDelegate
>

/// Forwards the body consumer's demand and departure to the handler on its event loop.
struct ResponseBodyDelegate: NIOAsyncSequenceProducerDelegate {
    let handler: NIOLoopBound<HTTPLinkHandler>
    let eventLoop: any EventLoop
    let id: UInt64

    func produceMore() {
        let (handler, id) = (self.handler, self.id)
        self.eventLoop.execute { handler.value.consumerWantsMore(id: id) }
    }

    func didTerminate() {
        let (handler, id) = (self.handler, self.id)
        self.eventLoop.execute { handler.value.consumerGone(id: id) }
    }
}

/// How a request's body starts out on the link.
enum RequestBodyStart {
    case none
    /// A body known up front: written with the head, in one flush.
    case complete(ByteBuffer)
    /// A body the caller streams with ``HTTPLinkHandler/writeBody(id:_:)`` and
    /// ``HTTPLinkHandler/endRequest(id:)``.
    case streamed
}

/// What the async side holds of one exchange. All members are safe to use from any thread.
struct ExchangeHandle: Sendable {
    let id: UInt64
    /// The final response head.
    let head: EventLoopFuture<HTTPResponse>
    /// Whether the request body may be sent (`false`: the device answered without waiting for
    /// it); only for a streamed request body.
    let mayWriteBody: EventLoopFuture<Bool>?
    /// Completes when the exchange is over; the value says whether the link may be reused.
    let completion: EventLoopFuture<Bool>
    /// The same, readable at once from any thread (`nil` while the exchange goes on).
    let outcome: ExchangeOutcome
    let body: Body
    /// Where the link records the response's trailer fields.
    let trailers: TrailerFields
    /// Set when the device's answer made the rest of a streamed request body unwanted.
    let requestBodyAbandonment: RequestBodyAbandonment

    enum Body: Sendable {
        /// The body streams through this producer from the start.
        case stream(ResponseBodyProducer)
        /// The body is gathered until the consumer claims it on the event loop (see
        /// ``HTTPLinkHandler/claimBody(_:id:bodyHandler:)``).
        case pending(NIOLoopBound<PendingResponseBody>)
    }
}

/// Whether the rest of a streamed request body was given up: the device sent its final answer
/// and closes the link before the body was complete (RFC 9112 §9.3: the client stops sending).
/// Set on the event loop before the writes it refuses fail, so the writer that sees such a
/// failure finds it set, and ends quietly instead of failing the exchange.
final class RequestBodyAbandonment: Sendable {
    private let value = Atomic<Bool>(false)

    func record() { self.value.store(true, ordering: .releasing) }

    var isRecorded: Bool { self.value.load(ordering: .acquiring) }
}

/// How an exchange ended, readable from any thread without waiting: recorded on the event loop
/// no later than `completion` succeeds, so a caller can tell at once whether the link is free.
final class ExchangeOutcome: Sendable {
    /// 0: going on; 1: over, the link reusable; 2: over, the link closed; 3: the link closed
    /// before a byte of the response arrived.
    private let value = Atomic<UInt8>(0)

    func record(reusable: Bool, answered: Bool = true) {
        self.value.store(reusable ? 1 : answered ? 2 : 3, ordering: .releasing)
    }

    /// The link failed before the device sent a byte of the response: on a reused link, the
    /// device most likely closed it while idle, and an idempotent request may be sent again.
    var failedUnanswered: Bool { self.value.load(ordering: .acquiring) == 3 }

    /// Whether the link may be reused, once the exchange is over; `nil` until then.
    var reusable: Bool? {
        switch self.value.load(ordering: .acquiring) {
        case 1: return true
        case 2, 3: return false
        default: return nil
        }
    }
}

/// The body of a response whose consumer has not yet asked for it. A consumer that runs on the
/// event loop claims it only after the read that carried the head has been fully processed; a
/// small response is then usually complete, and is handed over as one buffer, with no async
/// sequence (and no allocation and suspension per part) at all.
final class PendingResponseBody {
    let trailers: TrailerFields
    var buffer: ByteBuffer?
    var ended = false
    var failure: HTTPLinkError?

    init(trailers: TrailerFields) {
        self.trailers = trailers
    }

    var byteCount: Int { self.buffer?.readableBytes ?? 0 }

    func append(_ part: ByteBuffer) {
        if var buffer = self.buffer {
            self.buffer = nil  // keep it uniquely referenced so the append does not copy
            var part = part
            buffer.writeBuffer(&part)
            self.buffer = buffer
        } else {
            self.buffer = part
        }
    }

    func fail(_ error: HTTPLinkError) {
        if !self.ended && self.failure == nil { self.failure = error }
    }

    /// What the consumer reads: the whole body if it has ended, else a stream from
    /// `makeProducer()` that starts with what has gathered so far. `continuing` is the stream's
    /// source, to be fed from now on, and whether the consumer wants more at once; `nil` when
    /// the body is whole or has failed (the stream then ends with the failure).
    func claim(
        makeProducer: () -> ResponseBodyProducer.NewSequence
    ) -> (body: HTTPResponseBody, continuing: (source: ResponseBodyProducer.Source, wantsMore: Bool)?) {
        if self.ended && self.failure == nil {
            return (HTTPResponseBody(buffered: self.buffer, trailers: self.trailers), nil)
        }
        let producer = makeProducer()
        var wantsMore = true
        if let buffer = self.buffer, buffer.readableBytes > 0 {
            wantsMore = producer.source.yield(buffer) != .stopProducing
        }
        self.buffer = nil
        let body = HTTPResponseBody(producer: producer.sequence, trailers: self.trailers)
        if let failure = self.failure {
            producer.source.finish(failure)
            return (body, nil)
        }
        return (body, (producer.source, wantsMore))
    }
}

/// What the link holds of the exchange in progress: the promises the caller waits on, the
/// body sink, and the exchange's timers. Each ending settles every promise exactly once.
struct ExchangePorts {
    let id: UInt64
    private var head: EventLoopPromise<HTTPResponse>?
    private var mayWriteBody: EventLoopPromise<Bool>?
    private let completion: EventLoopPromise<Bool>
    let outcome = ExchangeOutcome()
    /// The response's trailer fields, recorded before the body ends.
    let trailers: TrailerFields
    var body: ResponseBodySink
    var timers: [Scheduled<Void>] = []
    /// An in-memory body held back until `100 Continue` (or the continue timeout).
    var heldBody: ByteBuffer?
    /// Streamed request body writes waiting for the channel to take more.
    private var writabilityWaiters: [EventLoopPromise<Void>] = []
    let requestBodyAbandonment = RequestBodyAbandonment()

    private init(
        id: UInt64,
        head: EventLoopPromise<HTTPResponse>,
        mayWriteBody: EventLoopPromise<Bool>?,
        completion: EventLoopPromise<Bool>,
        body: ResponseBodySink,
        trailers: TrailerFields
    ) {
        self.id = id
        self.trailers = trailers
        self.head = head
        self.mayWriteBody = mayWriteBody
        self.completion = completion
        self.body = body
    }

    /// The two ends of a new exchange: what the link keeps, and what the caller gets.
    /// - Parameters:
    ///   - streamedRequestBody: the caller streams the request body (and waits for leave to).
    ///   - pendingResponseBody: gather the body, up to this many bytes, until the consumer
    ///     claims it on the event loop; `nil`: stream it through `makeProducer()` from the start.
    static func open(
        id: UInt64,
        on eventLoop: any EventLoop,
        streamedRequestBody: Bool,
        pendingResponseBody: Int?,
        makeProducer: () -> ResponseBodyProducer.NewSequence
    ) -> (ExchangePorts, ExchangeHandle) {
        let head = eventLoop.makePromise(of: HTTPResponse.self)
        let mayWriteBody = streamedRequestBody ? eventLoop.makePromise(of: Bool.self) : nil
        let completion = eventLoop.makePromise(of: Bool.self)
        let trailers = TrailerFields()
        let sink: ResponseBodySink
        let handleBody: ExchangeHandle.Body
        if let limit = pendingResponseBody {
            let pending = PendingResponseBody(trailers: trailers)
            sink = .pending(pending, limit: limit)
            handleBody = .pending(NIOLoopBound(pending, eventLoop: eventLoop))
        } else {
            let producer = makeProducer()
            sink = .stream(producer.source)
            handleBody = .stream(producer.sequence)
        }
        let ports = ExchangePorts(
            id: id,
            head: head,
            mayWriteBody: mayWriteBody,
            completion: completion,
            body: sink,
            trailers: trailers
        )
        let handle = ExchangeHandle(
            id: id,
            head: head.futureResult,
            mayWriteBody: mayWriteBody?.futureResult,
            completion: completion.futureResult,
            outcome: ports.outcome,
            body: handleBody,
            trailers: trailers,
            requestBodyAbandonment: ports.requestBodyAbandonment
        )
        return (ports, handle)
    }

    mutating func deliverHead(_ response: HTTPResponse) {
        self.head?.succeed(response)
        self.head = nil
    }

    /// Tells a streamed request body whether it may be sent.
    mutating func resolveMayWriteBody(_ value: Bool) {
        self.mayWriteBody?.succeed(value)
        self.mayWriteBody = nil
    }

    /// The rest of the request body is not sent: a held body is dropped, a streamed one's writer
    /// is told (its waits end, its next write fails, ``RequestBodyAbandonment`` says why).
    mutating func abandonRequestBody() {
        self.requestBodyAbandonment.record()
        self.heldBody = nil
        self.resolveMayWriteBody(false)
        self.becameWritable()
    }

    mutating func waitForWritability(on eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        let writable = eventLoop.makePromise(of: Void.self)
        self.writabilityWaiters.append(writable)
        return writable.futureResult
    }

    mutating func becameWritable() {
        let waiters = self.writabilityWaiters
        self.writabilityWaiters.removeAll()
        for waiter in waiters { waiter.succeed() }
    }

    /// Fails what the caller waits for; the exchange itself goes on (its rest is drained).
    mutating func failCaller(_ error: HTTPLinkError) {
        self.head?.fail(error)
        self.head = nil
        self.body.finish(error)
    }

    /// The exchange is over. A drained body's sink is still open: it is ended here.
    mutating func complete(reusable: Bool) {
        self.cancelTimers()
        self.becameWritable()  // nothing waits once the request is complete; never leave a promise
        // A consumer that left before the head (its body sequence dropped) never saw it: the
        // promise is still open (found by the `response` fuzz target; NIO's debug builds trap on
        // a promise that is never completed).
        let abandoned = HTTPLinkError(.cancelled, "the response was abandoned")
        self.head?.fail(abandoned)
        self.head = nil
        self.resolveMayWriteBody(false)
        self.body.finish(abandoned)
        self.outcome.record(reusable: reusable)
        self.completion.succeed(reusable)
    }

    /// The link failed during the exchange; `answered`: a byte of the response had arrived.
    mutating func fail(_ error: HTTPLinkError, answered: Bool) {
        // First: the caller, woken by the failures below, reads it at once.
        self.outcome.record(reusable: false, answered: answered)
        self.cancelTimers()
        self.head?.fail(error)
        self.head = nil
        self.resolveMayWriteBody(false)
        let waiters = self.writabilityWaiters
        self.writabilityWaiters.removeAll()
        for waiter in waiters { waiter.fail(error) }
        self.body.finish(error)
        self.completion.succeed(false)
    }

    private mutating func cancelTimers() {
        for timer in self.timers { timer.cancel() }
        self.timers.removeAll()
    }
}
