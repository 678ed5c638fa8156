import AccessoryTransport
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1
import NIOPosix
import Synchronization

/// One persistent HTTP/1.1 link to an accessory over a byte stream pair.
///
/// Requests run one at a time, in the order they were made (a byte stream pair carries one
/// exchange at a time; HTTP/1.1 pipelining would make every failure ambiguous). The link is
/// opened on first use and kept open across requests. When an exchange leaves it out of step —
/// a framing error, a response that could not be drained, a device that closed it — the next
/// request reopens it (and, on transports that may carry stale bytes, waits for the line to go
/// quiet first), so stale bytes are never read as a response.
public final class HTTPLink: Sendable {
    /// The byte stream transport the link opens, and opens again when it must.
    public let transport: any ByteStreamTransport
    /// How the link behaves: Host header, limits, timeouts, drain bound, tracing.
    public let configuration: LinkConfiguration
    let eventLoop: any EventLoop
    /// Runs this link's exchanges (see ``execute(_:body:deadline:_:)``).
    public let taskExecutor: EventLoopTaskExecutor
    private let gate = FIFOGate()
    /// Opens a timeout gave up on, still ending (``shutdown()`` waits for them).
    let stragglers = OpenStragglers()
    let state = TrackedMutex(LinkState())
    private let nextExchangeID = Atomic<UInt64>(0)

    struct Connection: Sendable {
        let stream: OpenedByteStream
        let pipeline: LinkPipeline
        /// A new session on a stream already open (in band), not a transport just opened: a
        /// device that closes it as the first request goes out raced that request as it would
        /// on an idle link, and the request may be sent again like there.
        var renewedInBand = false
        var handler: NIOLoopBound<HTTPLinkHandler> { self.pipeline.linkHandler }
    }

    struct LinkState {
        var connection: Connection?
        /// A stream the link gave up that stays open for a new session in band
        /// (``OpenedByteStream/renewal``), to be renewed by the next request.
        var parked: Connection?
        var opens = 0
        var renewals = 0
        var isShutDown = false
        /// The last exchange's caller has returned, and the link is still finishing that
        /// exchange (draining it, or closing).
        var finishingBehind = false
        /// Streams closed by the link that may still be releasing (a child being reaped…),
        /// so that `shutdown` can wait for them too.
        var releasing: [ObjectIdentifier: OpenedByteStream] = [:]
        /// An open under way, which requests join; it goes on when the request that started it
        /// gives up (its deadline passed), and its connection serves the next request.
        var pendingOpen: (id: Int, task: Task<Connection, any Error>)?
        var openAttempts = 0
    }

    /// A link that is not open yet: the first request opens it.
    ///
    /// - Parameters:
    ///   - transport: the byte stream pair to the accessory.
    ///   - configuration: how the link behaves; the defaults of ``LinkConfiguration/init()`` by
    ///     default.
    ///   - eventLoop: the event loop the link's channel and ``taskExecutor`` run on; by default
    ///     the next loop of `MultiThreadedEventLoopGroup.singleton`.
    public init(
        transport: any ByteStreamTransport,
        configuration: LinkConfiguration = .init(),
        eventLoop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next()
    ) {
        self.transport = transport
        self.configuration = configuration
        self.eventLoop = eventLoop
        self.taskExecutor = EventLoopTaskExecutor(eventLoop)
    }

    /// How many times the byte stream pair has been opened (1 while the link stays in step).
    public var openCount: Int { self.state.withLock { $0.opens } }

    /// How many times a new stream was started on the open transport instead of reopening it
    /// (a session restarted in band after an abandoned response, an integrity error or a
    /// timeout; `OpenedByteStream.renewal` in AccessoryTransport).
    public var renewalCount: Int { self.state.withLock { $0.renewals } }

    /// Runs one exchange: sends `request` with `body`, waits for the response head, and hands
    /// the response to `handle`, which may stream the body. When `handle` returns or throws, the
    /// call returns at once; the rest of the body is then drained (bounded) or, on a transport
    /// that opens independent streams, its stream closed, before the next exchange may use the
    /// link.
    ///
    /// `handle` runs where the caller runs. A caller that runs with ``taskExecutor`` as its task
    /// executor preference (`withTaskExecutorPreference(link.taskExecutor) { … }`) keeps the
    /// whole exchange on the link's event loop thread, with no thread wake-up between writing
    /// the request and reading the response: the lowest latency for many small requests. Such
    /// a caller must not block while it has that preference.
    ///
    /// - Parameters:
    ///   - request: the request head. One without an authority is sent with the configuration's
    ///     ``LinkConfiguration/host`` as `Host`.
    ///   - body: the request body; none by default.
    ///   - deadline: the call ends by then, waiting in line and the link's open
    ///     included: the exchange fails with `exchangeTimeout`, and what is left of it is cleared
    ///     up behind the caller (an open under way goes on, and serves the next request). `nil`
    ///     (the default): no deadline.
    ///   - handle: receives the response once its head has arrived, and may read its body.
    /// - Returns: what `handle` returns.
    /// - Throws: what `handle` throws (a `CancellationError` becomes ``HTTPLinkError/Code/cancelled``);
    ///   ``HTTPLinkError`` for every failure of the link (`invalid-request`, `exchange-timeout`,
    ///   `link-closed`, `idle-timeout`, `malformed-response`…).
    public func execute<Result: Sendable>(
        _ request: HTTPRequest,
        body: HTTPRequestBody = .none,
        deadline: ContinuousClock.Instant? = nil,
        _ handle: (HTTPLinkResponse) async throws -> Result
    ) async throws -> Result {
        try await self.perform(request, body: body, deadline: deadline, handle)
    }

    /// Like ``execute(_:body:deadline:_:)``, but with `handleIsLinkWork` the exchange, `handle`
    /// included, runs on the link's event loop whatever the caller's executor: for callers whose
    /// `handle` is their own non-blocking code (collecting a small body, say), so that a request
    /// costs one thread hop in and one out instead of one per step.
    package func execute<Result: Sendable>(
        _ request: HTTPRequest,
        body: HTTPRequestBody = .none,
        deadline: ContinuousClock.Instant? = nil,
        handleIsLinkWork: Bool,
        _ handle: (HTTPLinkResponse) async throws -> Result
    ) async throws -> Result {
        try await body.runExchange(handleIsLinkWork: handleIsLinkWork, on: self.taskExecutor) {
            try await self.perform(request, body: body, deadline: deadline, handle)
        }
    }

    private func perform<Result: Sendable>(
        _ request: HTTPRequest,
        body: HTTPRequestBody,
        deadline: ContinuousClock.Instant?,
        _ handle: (HTTPLinkResponse) async throws -> Result
    ) async throws -> Result {
        do {
            return try await self.performOnce(request, body: body, deadline: deadline, retryable: true, handle)
        } catch let retry as RetryOnAFreshLink {
            self.configuration.tracer?.emit(
                .note("the device closed the idle link as the request went out; sending it again on a fresh link")
            )
            do {
                return try await self.performOnce(request, body: body, deadline: deadline, retryable: false, handle)
            } catch {
                throw error is RetryOnAFreshLink ? retry.error : error
            }
        }
    }

    private func performOnce<Result: Sendable>(
        _ request: HTTPRequest,
        body: HTTPRequestBody,
        deadline: ContinuousClock.Instant?,
        retryable: Bool,
        _ handle: (HTTPLinkResponse) async throws -> Result
    ) async throws -> Result {
        try RequestValidation.validate(request)
        let head = try RequestHead.make(request, body: body, configuration: self.configuration)
        let nioDeadline = deadline.map { NIODeadline.now() + TimeAmount(ContinuousClock.now.duration(to: $0)) }
        try await self.waitInLine(until: nioDeadline)
        // The gate is left when the exchange is over: at once if it is when the caller is done
        // with it, else behind the caller (see `release`), never on the caller's time.
        var releasedBehind = false
        defer { if !releasedBehind { self.gate.leave() } }
        try Task.checkCancellation()

        let id = self.nextExchangeID.add(1, ordering: .relaxed).newValue
        let start: RequestBodyStart
        switch body.storage {
        case .none: start = .none
        case .bytes(let buffer): start = .complete(buffer)
        case .stream: start = .streamed
        }
        // On a link already open, one event-loop hop checks that it is still usable and starts
        // the exchange; only when it is not (or none is open) is a connection opened first.
        let connection: Connection
        let exchange: ExchangeHandle
        var reused = false
        if let existing = try self.existingConnection(),
            let started = try await self.startExchange(
                on: existing,
                id: id,
                head: head,
                body: start,
                deadline: nioDeadline,
                ifUsable: true
            )
        {
            (connection, exchange, reused) = (existing, started, true)
        } else {
            connection = try await self.openConnection(deadline: nioDeadline)
            reused = connection.renewedInBand
            guard
                let started = try await self.startExchange(
                    on: connection,
                    id: id,
                    head: head,
                    body: start,
                    deadline: nioDeadline,
                    ifUsable: false
                )
            else {
                throw HTTPLinkError(.transportFailed, "the link could not start an exchange")
            }
            exchange = started
        }
        let handler = connection.handler

        do {
            let result = try await withTaskCancellationHandler {
                try await self.run(exchange, body: body, handler: handler, handle)
            } onCancel: {
                self.eventLoop.execute { handler.value.cancel(id: id) }
            }
            releasedBehind = self.release(exchange, connection)
            return result
        } catch {
            releasedBehind = self.release(exchange, connection)
            let enriched = try await self.enrich(error, connection, until: nioDeadline)
            if retryable, reused, exchange.outcome.failedUnanswered, (enriched as? HTTPLinkError)?.code == .linkClosed,
                ResendPolicy.mayResend(request, body)
            {
                throw RetryOnAFreshLink(error: enriched)
            }
            throw enriched
        }
    }

    /// Waits for the link's turn, within the caller's deadline.
    private func waitInLine(until deadline: NIODeadline?) async throws {
        let behind = self.state.withLock { $0.finishingBehind }
        let started = ContinuousClock.now
        do {
            try await self.gate.enter(expiringAt: deadline, on: self.eventLoop)
        } catch is FIFOGate.Expired {
            throw HTTPLinkError(
                .exchangeTimeout,
                behind
                    ? "the request timed out while the link was still discarding the previous response "
                        + "(its caller had given up on it; see LinkConfiguration.drainTimeout)"
                    : "the request timed out waiting for the link (another request was using it)"
            )
        } catch {
            throw HTTPLinkError(.cancelled, "the request was cancelled while waiting for the link", underlying: error)
        }
        if behind, let tracer = self.configuration.tracer {
            tracer.emit(.note("waited \(started.duration(to: .now)) for the previous response to be discarded"))
        }
    }

    /// The caller is done with `exchange`. If the exchange is over, the link is free for the
    /// next one now (returns `false`: the caller leaves the gate). Otherwise what is left of it
    /// — draining an abandoned response, or tearing the link down — goes on behind the caller,
    /// which returns at once; the gate is left when it is over (returns `true`). The next
    /// request waits for that, within its own deadline.
    private func release(_ exchange: ExchangeHandle, _ connection: Connection) -> Bool {
        if let reusable = exchange.outcome.reusable {
            if !reusable { self.forget(connection) }
            return false
        }
        self.state.withLock { $0.finishingBehind = true }
        exchange.completion.whenComplete { result in
            // `completion` never fails.
            if (try? result.get()) != true { self.forget(connection) }
            self.state.withLock { $0.finishingBehind = false }
            self.gate.leave()
        }
        return true
    }

    /// Closes the link and waits until the transport has released what it held (a child
    /// process reaped, a serial line's settings restored). Exchanges in progress fail; later
    /// ones throw `.shutDown`.
    public func shutdown() async {
        // The streams being closed go to `releasing` in the same step as they leave the state:
        // a second shutdown running at the same time (the CLI's, beside the one its SIGINT
        // handler started) then waits for them too, instead of returning at once and letting
        // the process exit before an exec: device's process group is gone.
        let (connection, parked, opening): (Connection?, Connection?, Task<Connection, any Error>?) =
            self.state.withLock { state in
                state.isShutDown = true
                defer { (state.connection, state.parked) = (nil, nil) }
                for stream in [state.connection?.stream, state.parked?.stream].compactMap({ $0 }) {
                    state.releasing[ObjectIdentifier(stream.channel)] = stream
                }
                return (state.connection, state.parked, state.pendingOpen?.task)
            }
        // An open that outlived its request: it gives up (or closes what it opened) and is
        // waited for, so that nothing it holds outlives the link.
        opening?.cancel()
        _ = await opening?.result
        if let connection {
            let handler = connection.handler
            self.eventLoop.execute { handler.value.close(reason: HTTPLinkError(.shutDown, "the link was shut down")) }
            // The handler may only have ended its session (a transport that renews in band).
            connection.stream.channel.close(promise: nil)
        }
        parked?.stream.channel.close(promise: nil)
        for stream in self.state.withLock({ Array($0.releasing.values) }) {
            await stream.waitUntilReleased()
        }
        // Opens that timed out are still closing what they made: that too ends before this returns.
        await self.stragglers.waitForAll(atMost: openCancelledGrace)
    }

    /// Closes the link's byte stream once no exchange uses it, and waits until the transport
    /// released what it held (a serial line unlocked, USB interfaces released), so that another
    /// program can use the device meanwhile; the next request opens it again. Returns whether a
    /// stream was open. An exchange in progress is waited for, not cut.
    public func releaseTransport() async -> Bool {
        guard (try? await self.waitInLine(until: nil)) != nil else { return false }
        defer { self.gate.leave() }
        // An open whose request gave up may still be under way: it is let finish, then closed;
        // one that timed out is let end closing what it made.
        await self.waitForPendingOpen()
        await self.stragglers.waitForAll(atMost: openCancelledGrace)
        let open = self.state.withLock { state in
            state.isShutDown ? [] : [state.connection, state.parked].compactMap { $0 }
        }
        for connection in open {
            self.close(connection)
            await connection.stream.waitUntilReleased()
        }
        if !open.isEmpty { self.configuration.tracer?.emit(.note("released \(self.transport) while idle")) }
        return !open.isEmpty
    }
}
