import AccessoryHTTP1
import AccessoryTransport
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOHTTPCompression
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOHTTPTypesHTTP2

/// The connection under an ``HTTP2Link``: opening it (frame-level streams, or stream channels
/// when the link decodes compressed responses), a stream on it, and moving to a new one.
extension HTTP2Link {

    /// Response body bytes a stream holds for its exchange before it stops reading (and so stops
    /// returning flow-control credit to the device) until the exchange takes them.
    static let responseHighWatermark = 256 << 10

    /// A new stream of the connection (opened first if there is none), with `first` written on
    /// it (the request head, and with a known body all of the request).
    func openStream(
        isHeadRequest: Bool,
        deadline: StreamDeadline?,
        first: [HTTPRequestPart]
    ) async throws -> HTTP2StreamExchange {
        let configuration = self.configuration
        for attempt in 0..<2 {
            let connection = try await self.connect(until: deadline?.at)
            let opened = connection.stream
            let endCause: @Sendable () -> TransportError? = { opened.endCause }
            do {
                switch connection.streams {
                case .frames(let streams):
                    // An exchange on another executor than the connection's holds its body
                    // parts across reads: they are gathered (``BodyBufferPool``).
                    let offLoop = !streams.eventLoop.inEventLoop
                    let open = { @Sendable () throws -> HTTP2StreamExchange in
                        let io = try FrameStreamIO.open(
                            on: streams,
                            idleTimeout: configuration.idleTimeout,
                            deadline: deadline,
                            first: first,
                            exchangeOffLoop: offLoop
                        )
                        return HTTP2StreamExchange(stream: io, tracer: configuration.tracer, endCause: endCause)
                    }
                    if streams.eventLoop.inEventLoop { return try open() }
                    return try await streams.eventLoop.submit(open).get()
                case .channels(let multiplexer, let resetCauses, let connection):
                    let exchange = try await Self.openStreamChannel(
                        multiplexer,
                        resetCauses: resetCauses,
                        connection: connection,
                        isHeadRequest: isHeadRequest,
                        deadline: deadline,
                        configuration: configuration,
                        endCause: endCause
                    )
                    exchange.send(first)
                    return exchange
                }
            } catch {
                // The connection went away under us (the device closed it), or takes no new
                // stream (GOAWAY, its stream IDs ran out: it closes itself once its streams are
                // over): open anew once.
                self.forget(connection, close: !(error is HTTP2StreamsRefused))
                if attempt == 1 {
                    throw HTTPLinkError(.linkClosed, "could not open an HTTP/2 stream: \(error)", underlying: error)
                }
            }
        }
        throw HTTPLinkError(.linkClosed, "could not open an HTTP/2 stream")
    }

    /// A stream channel with its pipeline: the HTTP/2 payloads converted to HTTP/1 parts for
    /// NIO's decompressor, and back.
    private static func openStreamChannel(
        _ multiplexer: NIOHTTP2Handler.AsyncStreamMultiplexer<Void>,
        resetCauses: NIOLoopBound<StreamResetCauses>,
        connection: NIOLoopBound<StreamChannelsConnection>,
        isHeadRequest: Bool,
        deadline: StreamDeadline?,
        configuration: LinkConfiguration,
        endCause: @escaping @Sendable () -> TransportError?
    ) async throws -> HTTP2StreamExchange {
        try await multiplexer.openStream { stream in
            stream.eventLoop.makeCompletedFuture {
                // After the device's GOAWAY the request goes to a new connection (as on a link of
                // frame-level streams); NIO would fail its HEADERS only when written.
                if let refusal = connection.value.refusal { throw HTTP2StreamsRefused(reason: refusal) }
                let batches = ResponseBatches(
                    eventLoop: stream.eventLoop,
                    idleTimeout: configuration.idleTimeout,
                    deadline: deadline
                )
                let handler = ResponseStreamHandler(
                    batches: batches,
                    highWatermark: Self.responseHighWatermark,
                    resetCauses: resetCauses.value,
                    connection: connection.value
                )
                try stream.pipeline.syncOperations.addHandlers(
                    EndStreamCoalescer(),
                    HTTP2FramePayloadToHTTP1ClientCodec(httpProtocol: .http),
                    NIOHTTPResponseDecompressor(limit: .ratio(configuration.maxDecompressionRatio)),
                    DecompressionFailureHandler(isHeadRequest: isHeadRequest),
                    HTTP1ToHTTPClientCodec(),
                    handler
                )
                let io = StreamChannelIO(
                    channel: stream,
                    batches: NIOLoopBound(batches, eventLoop: stream.eventLoop),
                    arrival: batches.arrival
                )
                return HTTP2StreamExchange(stream: io, tracer: configuration.tracer, endCause: endCause)
            }
        }
    }
    /// The open connection, or the one being opened, waited for until `deadline`.
    func connect(until deadline: NIODeadline?) async throws -> Connection {
        enum Next {
            case ready(Connection)
            case wait(Task<Connection, any Error>)
        }
        let next: Next = try self.connection.withLock { state in
            switch state {
            case .open(let connection) where connection.channel.isActive && !connection.isParked:
                // The common case, without a task: one per exchange cost a hop to the global
                // executor and back.
                return .ready(connection)
            case .opening(let task):
                return .wait(task)
            case .shutDown:
                throw HTTPLinkError(.shutDown, "the link was shut down")
            case .idle, .open:
                // The open is a task of its own: a caller whose deadline passes (or who is
                // cancelled) stops waiting for it, and it goes on for the next request, which
                // finds the connection it made.
                var previous: Connection?
                if case .open(let connection) = state { previous = connection }
                let task = Task {
                    do {
                        let connection = try await self.open(after: previous)
                        let kept = self.connection.withLock { state in
                            guard case .opening = state else { return false }
                            state = .open(connection)
                            return true
                        }
                        if !kept {
                            connection.channel.close(promise: nil)
                            await connection.stream.waitUntilReleased()
                            throw HTTPLinkError(.shutDown, "the link was shut down while it was opening")
                        }
                        return connection
                    } catch {
                        self.connection.withLock { state in
                            if case .opening = state { state = .idle }
                        }
                        throw error
                    }
                }
                state = .opening(task)
                return .wait(task)
            }
        }
        switch next {
        case .ready(let connection): return connection
        case .wait(let opening):
            return try await waitForOpen(
                opening,
                until: deadline,
                expired: "the exchange took longer than its deadline while the link was opening",
                cancelled: "the request was cancelled while the link was opening"
            )
        }
    }

    /// The link is done with `connection`. One that gave its stream up in band stays, for the
    /// next request to start a new session on; any other is closed (with `close`) and dropped.
    func forget(_ connection: Connection, close: Bool = true) {
        let parked = connection.isParked && connection.channel.isActive
        self.connection.withLock { state in
            if !parked, case .open(let current) = state, current.channel === connection.channel { state = .idle }
        }
        if !parked { self.release(connection.stream, close: close) }
    }

    /// Closes `stream` (unless `close` is false: it is still in use and closes by itself), and
    /// keeps it until the transport has released what it held (an `exec:` child reaped), so that
    /// ``HTTP2Link/shutdown()`` waits for it: a stream the link let go of before the shutdown
    /// must not outlive it either.
    func release(_ stream: OpenedByteStream, close: Bool = true) {
        let key = ObjectIdentifier(stream.channel)
        let isNew = self.releasing.withLock { $0.updateValue(stream, forKey: key) == nil }
        if close { stream.channel.close(promise: nil) }
        guard isNew else { return }
        Task {
            await stream.waitUntilReleased()
            self.releasing.withLock { _ = $0.removeValue(forKey: key) }
        }
    }

    /// A new connection after `previous`: on a new session on its transport when it gave its
    /// stream up in band and the transport is still open, else on the transport opened anew.
    private func open(after previous: Connection?) async throws -> Connection {
        guard let previous else { return try await self.open() }
        if previous.isParked, previous.channel.isActive, previous.stream.renewal != nil {
            if let renewed = try await self.renew(previous) { return renewed }
        } else {
            self.release(previous.stream)
        }
        return try await self.open()
    }

    /// Starts a new session on `parked`'s transport and a connection on it. Returns `nil` if the
    /// transport closed meanwhile (it is then opened again); throws if the device did not take
    /// the new session within the open timeout (the channel is closed, and the next request
    /// opens the transport again).
    private func renew(_ parked: Connection) async throws -> Connection? {
        let configuration = self.configuration
        let build = self.connectionBuilder()
        do {
            let stream = parked.stream
            let (streams, parking) = try await raceOpen(
                "restarting the session on \(self.transport)",
                timeout: configuration.openTimeout,
                stragglers: self.stragglers,
                cancelled: "the request was cancelled while the link was restarting its session",
                discard: { _ in
                    stream.channel.close(promise: nil)
                    await stream.waitUntilReleased()
                },
                { try await stream.renew(building: build) }
            )
            self.renewals.withLock { $0 += 1 }
            configuration.tracer?.emit(
                .note("started a new session on \(self.transport) (in band, not reopened; HTTP/2)")
            )
            return Connection(stream: parked.stream, streams: streams, parking: parking)
        } catch {
            let wasOpen = parked.channel.isActive
            self.release(parked.stream)
            // A closed transport is opened again, unless the link is shutting down (cancelled).
            guard wasOpen || (error as? HTTPLinkError)?.code == .cancelled else { return nil }
            switch error {
            case let error as HTTPLinkError: throw error
            case let error as TransportError where error.code == .openTimedOut:
                throw HTTPLinkError(.openTimeout, error.message, underlying: error)
            default:
                throw HTTPLinkError(
                    .transportFailed,
                    "could not restart the session on \(self.transport): \(error)",
                    underlying: error
                )
            }
        }
    }

    /// The stream closed before may still hold the device (a USB interface released by the
    /// bridge's thread after its last transfer is back): opened now, this process's own claim
    /// would make it look busy (`ByteStreamTransport.reopenWaitsForRelease`). Waited for within
    /// the open timeout.
    private func releasedDevice() -> ReleaseWait {
        guard self.transport.reopenWaitsForRelease else { return ReleaseWait([]) }
        // Only streams already closing: a connection that refused new streams but still carries
        // some (released with `close: false`) may hold a long download, and the new connection
        // may find another interface free meanwhile.
        return ReleaseWait(self.releasing.withLock({ Array($0.values) }).filter { !$0.channel.isActive })
    }

    func open() async throws -> Connection {
        let configuration = self.configuration
        do {
            let build = self.connectionBuilder()
            let transport = self.transport
            let eventLoop = self.eventLoop
            // Fails at the open timeout (or the shutdown's cancellation) even while the open
            // takes its time to end: it goes on closing what it made, and the link's shutdown
            // waits for it (`stragglers`).
            let releases = self.releasedDevice()
            let (stream, built) = try await raceOpen(
                "opening \(transport)",
                timeout: configuration.openTimeout,
                stragglers: self.stragglers,
                cancelled: "the request was cancelled while the link was opening",
                timeoutNote: { releases.note },
                discard: { opened in
                    self.release(opened.0)
                    await opened.0.waitUntilReleased()
                },
                { () async throws -> (stream: OpenedByteStream, output: (Streams, HTTP2StreamParking)) in
                    await releases.run()
                    // A race given up meanwhile (the open timeout, a shutdown) would only close
                    // what it opened: the device is not opened at all.
                    try Task.checkCancellation()
                    return try await transport.open(on: eventLoop, building: build)
                }
            )
            self.opens.withLock { $0 += 1 }
            configuration.tracer?.emit(.note("opened \(self.transport) (HTTP/2, prior knowledge)"))
            return Connection(stream: stream, streams: built.0, parking: built.1)
        } catch let error as HTTPLinkError {
            throw error
        } catch let error as TransportError where error.code == .openTimedOut {
            throw HTTPLinkError(.openTimeout, error.message, underlying: error)
        } catch {
            throw HTTPLinkError(.transportFailed, "could not open \(self.transport): \(error)", underlying: error)
        }
    }

    /// Builds a connection's handlers on a byte stream (opened, or renewed in band): the
    /// stream's end (``HTTP2StreamEnd``) at the bottom, the watch for the device's answer to the
    /// preface (``HTTP2PrefaceAnswerWatch``), the frame trace for `-v`, NIOHTTP2Handler and the
    /// streams.
    private func connectionBuilder() -> @Sendable (any Channel) -> EventLoopFuture<(Streams, HTTP2StreamParking)> {
        let configuration = self.configuration
        var settings = HTTP2Windows.configuration()
        settings.connection.initialSettings += [
            HTTP2Setting(parameter: .enablePush, value: 0),
            HTTP2Setting(
                parameter: .maxFrameSize,
                value: HTTP2Windows.maxFrameSize(bytesPerSecond: self.transport.bytesPerSecond)
            ),
            HTTP2Setting(parameter: .maxHeaderListSize, value: configuration.limits.maxHeaderBlockSize),
        ]
        let pipelineSettings = settings
        let firstStreamID = self.firstStreamID
        return { channel in
            channel.eventLoop.makeCompletedFuture {
                try HTTP2Windows.configureReads(of: channel)
                let pipeline = channel.pipeline.syncOperations
                let end = HTTP2StreamEnd()
                let watch = HTTP2PrefaceAnswerWatch(bound: configuration.idleTimeout)
                try pipeline.addHandlers(end, watch)
                end.handlersAbove.append(watch)
                if let tracer = configuration.tracer {
                    let trace = HTTP2FrameTraceHandler(tracer: tracer, client: true)
                    try pipeline.addHandler(trace)
                    end.handlersAbove.append(trace)
                }
                guard configuration.decompressResponses else {
                    let streams = HTTP2ClientStreams(
                        connectionWindow: HTTP2Windows.connection,
                        firstStreamID: firstStreamID
                    )
                    let http2 = NIOHTTP2Handler(
                        mode: .client,
                        frameDelegate: streams,
                        connectionConfiguration: pipelineSettings.connection,
                        streamConfiguration: pipelineSettings.stream
                    )
                    try pipeline.addHandlers(http2, streams)
                    end.handlersAbove += [http2, streams]
                    streams.streamEnd = end
                    return (Streams.frames(NIOLoopBound(streams, eventLoop: channel.eventLoop)), end.parking)
                }
                let resetCauses = StreamResetCauses()
                let multiplexer = try pipeline.configureAsyncHTTP2Pipeline(
                    mode: .client,
                    streamDelegate: nil,
                    frameDelegate: resetCauses,
                    configuration: pipelineSettings
                ) { stream in
                    // The device may not push (SETTINGS_ENABLE_PUSH 0); a stream it starts
                    // anyway is closed.
                    stream.close(promise: nil)
                    return stream.eventLoop.makeSucceededVoidFuture()
                }
                let connection = StreamChannelsConnection()
                try pipeline.addHandlers(resetCauses, connection)
                end.handlersAbove += [try pipeline.handler(type: NIOHTTP2Handler.self), resetCauses, connection]
                return (
                    Streams.channels(
                        multiplexer,
                        NIOLoopBound(resetCauses, eventLoop: channel.eventLoop),
                        NIOLoopBound(connection, eventLoop: channel.eventLoop)
                    ),
                    end.parking
                )
            }
        }
    }
}
