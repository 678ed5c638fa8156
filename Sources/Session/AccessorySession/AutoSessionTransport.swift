import AccessoryTransport
import NIOCore
import Synchronization

/// `session=auto`: the first open sends HELLO; a device that answers it gets sessions from then
/// on, one that does not (within ``fallbackBound``, or by closing the stream) is spoken to in
/// plain HTTP/1.1 by this and every later open. The decision is kept for the transport's life.
///
/// A plain device that receives the HELLO sees 40 bytes that are not HTTP: nginx answers `400`
/// and closes (the fallback is immediate), Python's `http.server` waits for a line end that never
/// comes (the fallback takes ``fallbackBound``), our own responder answers HELLO (docs/framing.md
/// §6; measured in InteropTests' AutoSessionTests).
/// On a line that can hold stale bytes the plain open after the fallback waits for the line to
/// go quiet, as every plain reopen does.
public struct AutoSessionTransport: ByteStreamTransport {
    /// How long the first HELLO waits for its answer before falling back, unless the initializer
    /// is given another bound.
    public static let fallbackBound: Duration = .seconds(1)

    enum Decision { case unknown, sessions, plain }

    /// The byte stream transport to the device, spoken to with sessions or plain, as the first
    /// open decides.
    public let inner: any ByteStreamTransport
    private let session: SessionTransport
    private let decision = SharedDecision()

    /// Wraps `inner`; the first open falls back to plain HTTP/1.1 if HELLO is not answered within
    /// `fallbackAfter` (or the configuration's handshake timeout, if that is shorter). A slow
    /// device, or a slow build of our own responder, may need longer than the default.
    public init(
        wrapping inner: any ByteStreamTransport,
        configuration: SessionTransport.Configuration = .init(),
        fallbackAfter: Duration = Self.fallbackBound
    ) {
        self.inner = inner
        var probe = configuration
        probe.handshakeTimeout = min(configuration.handshakeTimeout, fallbackAfter)
        self.session = SessionTransport(wrapping: inner, configuration: probe)
    }

    public var description: String { "auto-session+\(self.inner)" }
    public var reopenMayCarryStaleBytes: Bool {
        self.decision.value == .sessions ? false : self.inner.reopenMayCarryStaleBytes
    }
    public var opensIndependentStreams: Bool {
        self.decision.value == .sessions ? true : self.inner.opensIndependentStreams
    }
    public var reopenWaitsForRelease: Bool { self.inner.reopenWaitsForRelease }
    public var bytesPerSecond: Int? { self.inner.bytesPerSecond }

    public func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        switch self.decision.value {
        case .plain:
            return try await self.inner.open(on: eventLoop, configure: configure)
        case .sessions:
            return try await self.session.open(on: eventLoop, configure: configure)
        case .unknown:
            do {
                let stream = try await self.session.open(on: eventLoop, configure: configure)
                self.decision.value = .sessions
                return stream
            } catch let error as SessionError where error.code == .handshakeTimeout {
                self.decision.value = .plain
                return try await self.inner.open(on: eventLoop, configure: configure)
            }
        }
    }

    /// Whether the device turned out to speak sessions (`nil` before the first open).
    public var speaksSessions: Bool? {
        switch self.decision.value {
        case .unknown: return nil
        case .sessions: return true
        case .plain: return false
        }
    }

    final class SharedDecision: Sendable {
        private let state = TrackedMutex(Decision.unknown)
        var value: Decision {
            get { self.state.withLock { $0 } }
            set { self.state.withLock { $0 = newValue } }
        }
    }
}
