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
import Synchronization

/// One HTTP/2 connection to an accessory, with prior knowledge (RFC 9113 §3.3), over any byte
/// stream transport (the session layer's included): every exchange is a stream of its own, so
/// exchanges run at once, each with its own flow control, and an abandoned one is reset
/// (RST_STREAM) without touching the others or draining anything.
///
/// The connection opens on the first request and again after it closed; HPACK keeps repeated
/// request heads to a few bytes, which counts on a slow serial line.
public final class HTTP2Link: Sendable {
    /// The byte stream transport the connection is opened on.
    public let transport: any ByteStreamTransport
    /// The link's settings (`LinkConfiguration`, module AccessoryHTTP1). HTTP/2 uses `host`,
    /// `openTimeout`, `idleTimeout` (per stream, while its exchange waits for the device),
    /// `decompressResponses` and `maxDecompressionRatio`, `limits.maxHeaderBlockSize` (as
    /// SETTINGS_MAX_HEADER_LIST_SIZE) and `tracer`.
    public let configuration: LinkConfiguration
    /// The event loop the connection's channel runs on.
    public let eventLoop: any EventLoop

    let connection = TrackedMutex<ConnectionState>(.idle)
    /// Streams the link let go of that may still be releasing what they held (``release(_:close:)``).
    let releasing = TrackedMutex<[ObjectIdentifier: OpenedByteStream]>([:])
    /// Opens (and in-band renewals) that timed out but are still ending (``shutdown()`` waits).
    let stragglers = OpenStragglers()
    let opens = TrackedMutex(0)
    let renewals = TrackedMutex(0)

    enum ConnectionState {
        case idle
        case opening(Task<Connection, any Error>)
        case open(Connection)
        case shutDown
    }

    struct Connection: Sendable {
        let stream: OpenedByteStream
        var channel: any Channel { self.stream.channel }
        let streams: Streams
        /// Set when the connection gave its stream up in band (``HTTP2StreamEnd``): its channel
        /// stays open for the next connection, on a new session.
        let parking: HTTP2StreamParking
        var isParked: Bool { self.parking.isParked }
    }

    /// How a connection's streams are kept: as frames (``HTTP2ClientStreams``), or as stream
    /// channels when the link decodes compressed responses (NIO's decompressor is a channel
    /// handler, so it needs a stream's pipeline).
    enum Streams: Sendable {
        case frames(NIOLoopBound<HTTP2ClientStreams>)
        case channels(
            NIOHTTP2Handler.AsyncStreamMultiplexer<Void>,
            NIOLoopBound<StreamResetCauses>,
            NIOLoopBound<StreamChannelsConnection>
        )
    }

    /// Runs async code on the connection's event loop (see `execute(_:body:deadline:handleIsLinkWork:_:)`).
    public let taskExecutor: EventLoopTaskExecutor

    /// A link that is not connected yet: the first request opens the connection.
    ///
    /// - Parameters:
    ///   - transport: the byte stream pair to the accessory.
    ///   - configuration: the link's settings (see ``configuration``).
    ///   - eventLoop: the event loop the connection's channel and ``taskExecutor`` run on.
    public convenience init(
        transport: any ByteStreamTransport,
        configuration: LinkConfiguration,
        eventLoop: any EventLoop
    ) {
        self.init(transport: transport, configuration: configuration, eventLoop: eventLoop, firstStreamID: 1)
    }

    /// A link whose connections number their first stream `firstStreamID` (odd): a test starts
    /// near the end of the range to see a connection's stream IDs run out.
    package init(
        transport: any ByteStreamTransport,
        configuration: LinkConfiguration,
        eventLoop: any EventLoop,
        firstStreamID: Int32
    ) {
        self.transport = transport
        self.configuration = configuration
        self.eventLoop = eventLoop
        self.taskExecutor = EventLoopTaskExecutor(eventLoop)
        self.firstStreamID = firstStreamID
    }

    /// The ID of each connection's first stream.
    let firstStreamID: Int32

    /// How many times the transport was opened for a connection.
    public var openCount: Int { self.opens.withLock { $0 } }
    /// How many connections started on a new session in band, on a transport that stayed open
    /// (the session layer's restart after a damaged frame, a dead peer, the device's CLOSE or a
    /// GOAWAY; docs/framing.md §8), instead of opening it again.
    public var renewalCount: Int { self.renewals.withLock { $0 } }

    /// Closes the connection and waits until the transport has released what it held (an
    /// `exec:` device's process group gone, a serial line's settings restored), as
    /// `HTTPLink.shutdown()` does; requests after this fail with `.shutDown`. An open under way is
    /// cancelled, and what it made is closed and waited for too, as is an open that timed out and
    /// is still ending, and every stream the link closed before (a connection that failed, one a
    /// reopen replaced).
    public func shutdown() async {
        let state = self.connection.withLock { state in
            defer { state = .shutDown }
            return state
        }
        switch state {
        case .open(let connection):
            try? await connection.channel.close()
            await connection.stream.waitUntilReleased()
        case .opening(let task):
            // The open finds the link shut down when it ends, and closes what it opened itself.
            task.cancel()
            _ = await task.result
        case .idle, .shutDown: break
        }
        await self.stragglers.waitForAll(atMost: openCancelledGrace)
        await self.closeReleasing()
    }

    /// Closes the streams the link let go of before (one still in use, a connection draining
    /// after the device's GOAWAY, is cut now) and waits until each is released.
    private func closeReleasing() async {
        for stream in self.releasing.withLock({ Array($0.values) }) {
            stream.channel.close(promise: nil)
            await stream.waitUntilReleased()
        }
    }

    /// Closes the connection, and waits until the transport released what it held, so that
    /// another program can use the device meanwhile; the next request opens it again. Returns
    /// whether a connection was open. Streams still in progress fail: call it when none are.
    public func releaseTransport() async -> Bool {
        let released: Connection? = self.connection.withLock { state in
            guard case .open(let connection) = state else { return nil }
            state = .idle
            return connection
        }
        await self.stragglers.waitForAll(atMost: openCancelledGrace)
        await self.closeReleasing()
        guard let released else { return false }
        released.channel.close(promise: nil)
        await released.stream.waitUntilReleased()
        return true
    }

    /// Sends `request` on a new stream and hands the response to `handle`. When `handle` returns
    /// the stream is closed; a response not read to its end is reset (RST_STREAM), at once.
    ///
    /// A `deadline` bounds the link's waits: the open, the request's writes, and every read of
    /// the response. When it passes, they fail with `exchange-timeout` and the stream is reset;
    /// a response that already ended fails nothing, and what `handle` awaits besides the
    /// response is its own (as on an HTTP/1.1 link).
    ///
    /// - Throws: what `handle` throws; `HTTPLinkError` for everything else (`exchange-timeout`
    ///   when `deadline` passes, `cancelled`, `link-closed`, `transport-failed`…).
    public func execute<Result: Sendable>(
        _ request: HTTPRequest,
        body: HTTPRequestBody = .none,
        deadline: ContinuousClock.Instant? = nil,
        _ handle: (HTTPLinkResponse) async throws -> Result
    ) async throws -> Result {
        try await self.exchange(request, body: body, deadline: deadline, handle)
    }

    /// Like ``execute(_:body:deadline:_:)``, but with `handleIsLinkWork` the exchange, `handle`
    /// included, runs on the connection's event loop whatever the caller's executor: opening the
    /// stream, writing the request and reading the response are several async steps, and each
    /// one would otherwise be a thread hop between the caller's pool and the event loop.
    package func execute<Result: Sendable>(
        _ request: HTTPRequest,
        body: HTTPRequestBody = .none,
        deadline: ContinuousClock.Instant? = nil,
        handleIsLinkWork: Bool,
        _ handle: (HTTPLinkResponse) async throws -> Result
    ) async throws -> Result {
        try await body.runExchange(handleIsLinkWork: handleIsLinkWork, on: self.taskExecutor) {
            try await self.execute(request, body: body, deadline: deadline, handle)
        }
    }

    /// With a deadline, the link's own waits end there: the open (``connect(until:)``), and on
    /// the stream its request writes and its response reads (``ResponseStreamHandler`` resets the
    /// stream at the deadline). What `handle` awaits besides the response is its own, as on an
    /// HTTP/1.1 link.
    private func exchange<Result: Sendable>(
        _ request: HTTPRequest,
        body: HTTPRequestBody,
        deadline: ContinuousClock.Instant?,
        _ handle: (HTTPLinkResponse) async throws -> Result
    ) async throws -> Result {
        var streamDeadline: StreamDeadline?
        if let deadline {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { throw Self.deadlineError }
            streamDeadline = StreamDeadline(at: .now() + TimeAmount(left), expiry: DeadlineExpiry())
        }
        let head = HTTP2RequestHead.make(request, body: body, configuration: self.configuration)
        let tracer = self.configuration.tracer
        tracer?.emit(.requestHead(Self.render(head)))
        // A known body goes in one flush with its head and end, so the end rides on the last
        // frame instead of a DATA frame of its own; a streamed body follows its head.
        let first: [HTTPRequestPart]
        switch body.storage {
        case .none: first = [.head(head), .end(nil)]
        case .bytes(let buffer):
            first = buffer.readableBytes > 0 ? [.head(head), .body(buffer), .end(nil)] : [.head(head), .end(nil)]
        case .stream: first = [.head(head)]
        }
        // A stream the device refused with GOAWAY (RFC 9113 §6.8: above its last stream ID, so
        // not processed) is sent again on a new connection, when its body can be sent again.
        let replayable: Bool
        if case .stream = body.storage { replayable = false } else { replayable = true }
        // A stream whose session ended before its response head (a damaged frame, a dead peer,
        // the device's CLOSE) is sent once more on the next session when that cannot do anything
        // twice, as on an HTTP/1.1 link (docs/protocol.md).
        var mayResend = ResendPolicy.mayResend(request, body)
        for attempt in 0... {
            let stream = try await self.openStream(
                isHeadRequest: request.method == .head,
                deadline: streamDeadline,
                first: first
            )
            let expiry = streamDeadline?.expiry
            defer { stream.close() }
            do {
                switch body.storage {
                case .none, .bytes:
                    break
                case .stream(let length, let produce):
                    // The same rule as on HTTP/1.1: trailers follow only a body of unknown length.
                    let trailers = length == nil ? TrailerFields() : nil
                    let writer = RequestBodyWriter(trailers: trailers) { try await stream.sendWaiting(.body($0)) }
                    try await Self.produce(produce, into: writer, until: deadline)
                    let trailerFields = trailers?.value
                    if let trailerFields { tracer?.emit(.note("trailer fields: \(Self.render(trailerFields))")) }
                    try await stream.sendWaiting(.end(trailerFields))
                }
                let responseHead: HTTPResponse
                do {
                    responseHead = try await stream.finalHead()
                } catch let refused as HTTP2StreamsRefused where replayable && attempt < 2 {
                    tracer?.emit(.note("\(refused); sending the request again on a new connection"))
                    continue
                } catch let ended as any StreamEndingError where mayResend && stream.transportWriteTimeout == nil {
                    mayResend = false
                    tracer?.emit(.note("\(ended.message); sending the request again on the next session"))
                    continue
                }
                tracer?.emit(.responseHead(Self.render(responseHead)))
                let response = HTTPLinkResponse(
                    head: responseHead,
                    body: HTTPResponseBody(next: { try await stream.nextBodyBuffer() }, trailers: stream.trailers)
                )
                return try await handle(response)
            } catch let error as HTTPLinkError where Self.isCallersOwnEnd(error) {
                throw error
            } catch is CancellationError {
                throw HTTPLinkError(.cancelled, "the exchange was cancelled; its HTTP/2 stream was reset")
            } catch  where expiry?.hasPassed == true && (error is ChannelError || error is any NIOHTTP2Error) {
                // A request write failed because the stream was reset at the deadline.
                throw Self.deadlineError
            } catch  where stream.transportWriteTimeout != nil {
                // The transport ended the connection (a USB write timeout): said as the timeout it
                // was, whatever the stream saw of that end.
                throw stream.transportWriteTimeout ?? error
            } catch let error as HTTPLinkError {
                throw error
            } catch let error as any StreamEndingError {
                throw HTTPLinkError(
                    .linkClosed,
                    "the HTTP/2 connection's stream ended: \(error.message)",
                    underlying: error
                )
            } catch let error as HTTP2StreamsRefused {
                throw HTTPLinkError(.linkClosed, "\(error); the request was not processed", underlying: error)
            } catch let error as NIOHTTP2Errors.StreamClosed {
                throw HTTPLinkError(
                    .linkClosed,
                    HTTP2ErrorText.describe(error),
                    underlying: error
                )
            } catch let error as any NIOHTTP2Error {
                throw HTTPLinkError(
                    .malformedResponse,
                    "the HTTP/2 exchange failed: \(HTTP2ErrorText.describe(error))",
                    underlying: error
                )
            } catch let error as ChannelError {
                throw HTTPLinkError(.linkClosed, "the HTTP/2 connection closed: \(error)", underlying: error)
            }
        }
        throw HTTPLinkError(.linkClosed, "the device refused the request's HTTP/2 stream again and again")
    }

    /// The caller's own end or limit: whatever the connection did meanwhile is not the story.
    private static func isCallersOwnEnd(_ error: HTTPLinkError) -> Bool {
        switch error.code {
        case .cancelled, .shutDown, .exchangeTimeout, .invalidRequest, .responseBodyTooLarge: return true
        default: return false
        }
    }

    /// Runs a streamed body's producer, cancelled when `deadline` passes: one that waits for its
    /// source (a quiet pipe) rather than for the stream would otherwise hold the call past it
    /// (the stream's reset at the deadline reaches only a producer that writes).
    private static func produce(
        _ produce: @escaping @Sendable (RequestBodyWriter) async throws -> Void,
        into writer: RequestBodyWriter,
        until deadline: ContinuousClock.Instant?
    ) async throws {
        guard let deadline else { return try await produce(writer) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await produce(writer) }
            group.addTask {
                try await Task.sleep(until: deadline, clock: .continuous)
                throw Self.deadlineError
            }
            defer { group.cancelAll() }
            _ = try await group.next()
        }
    }

    static var deadlineError: HTTPLinkError {
        HTTPLinkError(.exchangeTimeout, "the exchange took longer than its deadline")
    }

    /// Trailer fields on one line, as `-v` shows them.
    static func render(_ trailers: HTTPFields) -> String {
        trailers.map { "\($0.name): \($0.value)" }.joined(separator: "; ")
    }

    /// A head as `-v` shows it: pseudo-header fields first, as on the wire.
    static func render(_ request: HTTPRequest) -> String {
        var text = ":method: \(request.method.rawValue)\n:scheme: \(request.scheme ?? "")"
        text += "\n:authority: \(request.authority ?? "")\n:path: \(request.path ?? "")"
        for field in request.headerFields { text += "\n\(field.name): \(field.value)" }
        return text
    }

    static func render(_ response: HTTPResponse) -> String {
        var text = ":status: \(response.status.code)"
        for field in response.headerFields { text += "\n\(field.name): \(field.value)" }
        return text
    }
}

/// An exchange's deadline on the connection's clock, and where its stream records that it passed.
struct StreamDeadline: Sendable {
    let at: NIODeadline
    let expiry: DeadlineExpiry
}
