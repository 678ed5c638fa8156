import AccessoryTransport
import NIOCore

/// What the handshake settled (docs/framing.md §3).
public struct SessionInfo: Sendable, Hashable {
    /// The session protocol version in use.
    public let version: UInt8
    /// The largest frame the device accepts.
    public let peerMaxFrameSize: Int
}

/// A byte stream transport with the session layer on it (docs/framing.md): opening it opens
/// the inner transport, sends HELLO with a fresh nonce and returns once the device answered it,
/// having dropped every byte that came before (the rest of an answer a dead process never read).
/// The HTTP link above then works unchanged, on a clean stream:
///
/// ```swift
/// let serial = try DeviceSpec(parsing: "serial:/dev/ttyACM0").makeTransport()
/// let client = AccessoryClient(transport: SessionTransport(wrapping: serial))
/// ```
///
/// Every stream it opens is a new session, so an abandoned response is never drained: the link
/// gives the stream up (CLOSE tells the device to stop at once) and the next request's HELLO
/// makes the device drop whatever it was still sending. The new session starts on the same
/// open transport (`OpenedByteStream.renewal`): a restart after an abandoned response, an
/// integrity error or a timeout never reopens the device.
public struct SessionTransport: ByteStreamTransport {
    /// The opener's settings.
    public struct Configuration: Sendable {
        /// How long to wait for the device's HELLO_ACK.
        public var handshakeTimeout: Duration = .seconds(3)
        /// A PING after this much silence inside a session; the session ends as dead after
        /// twice it. Silence while this side holds the device back, or while the device is still
        /// taking a backlog of bytes this side wrote (seen where the transport reports its
        /// kernel send queue), does not count (docs/framing.md §4). `nil`: no pings.
        public var pingInterval: Duration? = .seconds(5)
        /// The largest frame this side accepts (64 … 16384).
        public var maxFrameSize: Int = SessionFrame.maxFrameSize
        /// Receives one line per frame sent (`>`) or received (`<`), for `-v`.
        public var tracer: (@Sendable (String) -> Void)?

        /// The defaults: a 3 s handshake timeout, a PING after 5 s of silence, frames of up to
        /// 16384 bytes, no tracer.
        public init() {}
    }

    /// The byte stream transport the sessions run on.
    public let inner: any ByteStreamTransport
    /// The opener's settings, with ``Configuration/maxFrameSize`` brought into 64 … 16384.
    public let configuration: Configuration

    /// Puts the session layer on `inner`. Nothing is opened until ``open(on:configure:)``.
    ///
    /// - Parameters:
    ///   - inner: the byte stream transport to the device (a serial line, USB, a unix socket…).
    ///   - configuration: the opener's settings; those of ``Configuration/init()`` by default. A
    ///     ``Configuration/maxFrameSize`` outside 64 … 16384 is brought to the nearest bound.
    public init(wrapping inner: any ByteStreamTransport, configuration: Configuration = .init()) {
        self.inner = inner
        var configuration = configuration
        configuration.maxFrameSize = min(
            max(configuration.maxFrameSize, SessionFrame.minFrameSize),
            SessionFrame.maxFrameSize
        )
        self.configuration = configuration
    }

    public var description: String { "session+\(self.inner)" }
    /// The nonce drops stale bytes: nothing to wait out after a reopen.
    public var reopenMayCarryStaleBytes: Bool { false }
    /// A new session is independent of the old one, whatever the wire below.
    public var opensIndependentStreams: Bool { true }
    /// A reopen opens the same wire below.
    public var reopenWaitsForRelease: Bool { self.inner.reopenWaitsForRelease }
    public var bytesPerSecond: Int? { self.inner.bytesPerSecond }

    /// Opens the inner transport and completes the handshake.
    ///
    /// - Throws: ``SessionError`` (``SessionError/Code/handshakeTimeout``) if the device does not
    ///   answer HELLO; the inner transport's own error if it cannot be opened.
    public func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        try await self.openSession(on: eventLoop, configure: configure).stream
    }

    /// Like ``open(on:configure:)``, and also returns what the handshake settled.
    public func openSession(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> (stream: OpenedByteStream, session: SessionInfo) {
        let configuration = self.configuration
        let (opened, built) = try await self.inner.open(
            on: eventLoop,
            building: {
                channel -> EventLoopFuture<(EventLoopFuture<SessionInfo>, NIOLoopBound<SessionOpenerHandler>)> in
                let promise = channel.eventLoop.makePromise(of: SessionInfo.self)
                let handler = SessionOpenerHandler(configuration: configuration, handshakePromise: promise)
                do {
                    try channel.pipeline.syncOperations.addHandler(handler)
                } catch {
                    promise.fail(error)
                    return channel.eventLoop.makeFailedFuture(error)
                }
                let bound = NIOLoopBound(handler, eventLoop: channel.eventLoop)
                return configure(channel).map { (promise.futureResult, bound) }
            }
        )
        let handler = built.1
        let sendQueue = opened.sendQueue
        opened.channel.eventLoop.execute { handler.value.sendQueue = sendQueue }
        let session = try await Self.awaitHandshake(built.0, on: opened)
        let stream = opened.replacingRenewal { configure in
            let channel = opened.channel
            let handshake = try await channel.eventLoop.flatSubmit {
                () -> EventLoopFuture<EventLoopFuture<SessionInfo>> in
                guard let context = try? channel.pipeline.syncOperations.context(handler: handler.value) else {
                    return channel.eventLoop.makeFailedFuture(
                        SessionError(.closedByDevice, "the stream closed before the session could be restarted")
                    )
                }
                let renewed = handler.value.renew(context: context)
                return configure(channel).map { renewed }
            }.get()
            _ = try await Self.awaitHandshake(handshake, on: opened)
        }
        return (stream, session)
    }

    /// Waits for the device's HELLO_ACK; on failure the stream is closed, the transport has
    /// released what it held (an `exec:` child reaped) before this throws, and the error carries
    /// what the transport knows (a child's stderr…). A shutdown cancels an open here and then
    /// counts on nothing of it being left behind.
    private static func awaitHandshake(
        _ handshake: EventLoopFuture<SessionInfo>,
        on opened: OpenedByteStream
    ) async throws -> SessionInfo {
        try await opened.awaitOpeningStep(handshake, explaining: SessionError.self) { error, diagnostics in
            SessionError(error.code, "\(error.message) (\(diagnostics))")
        }
    }
}
