import AccessoryTransport
import NIOCore
import Synchronization

/// A byte stream transport wrapped in TLS: opening it opens the inner transport, runs the
/// handshake over it and returns only once the handshake has completed (and the peer was
/// trusted), so the HTTP layer above works unchanged:
///
/// ```swift
/// let tls = TLSTransport(
///     wrapping: UnixSocketTransport(path: "/run/accessory.sock"),
///     configuration: .client(serverName: "accessory.local", trust: TLSTrust(anchorFiles: ["ca.pem"]))
/// )
/// let client = AccessoryClient(transport: tls)
/// ```
///
/// Each `open` reads the configured files and the trust store anew, so a pairing made in the
/// meantime is seen by the next connection.
public struct TLSTransport: ByteStreamTransport {
    /// The transport the TLS connection runs over.
    public let inner: any ByteStreamTransport
    /// The TLS settings of every connection this transport opens.
    public let configuration: TLSConfiguration

    /// Wraps `inner` in TLS. Nothing is opened or read until ``open(on:configure:)``.
    ///
    /// - Parameters:
    ///   - inner: The transport the TLS connection runs over.
    ///   - configuration: The TLS settings, usually
    ///     ``TLSConfiguration/client(serverName:trust:identity:minimumVersion:)``.
    public init(wrapping inner: any ByteStreamTransport, configuration: TLSConfiguration) {
        self.inner = inner
        self.configuration = configuration
    }

    public var description: String { "tls+\(self.inner)" }
    public var reopenMayCarryStaleBytes: Bool { self.inner.reopenMayCarryStaleBytes }
    public var reopenWaitsForRelease: Bool { self.inner.reopenWaitsForRelease }
    /// A new TLS session over a new inner stream is as independent as the inner stream.
    public var opensIndependentStreams: Bool { self.inner.opensIndependentStreams }
    public var bytesPerSecond: Int? { self.inner.bytesPerSecond }

    /// Opens the inner transport and completes the handshake.
    ///
    /// - Throws: ``TLSError`` for every TLS failure (untrusted certificate, name or pin
    ///   mismatch, handshake failure, timeout); the inner transport's own error if it cannot
    ///   be opened.
    public func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        try await self.openSession(on: eventLoop, configure: configure).stream
    }

    /// Like ``open(on:configure:)``, and also returns the session's facts (version, cipher,
    /// the peer's chain).
    public func openSession(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> (stream: OpenedByteStream, session: TLSSessionInfo) {
        let context = try TLSContext(configuration: self.configuration)
        // The current connection's handler, for the next renewal to remove.
        let current = NIOLoopBoundBox.makeEmptyBox(valueType: TLSHandler.self, eventLoop: eventLoop)
        let (opened, handshake) = try await self.inner.open(
            on: eventLoop,
            building: { channel in Self.addHandler(context, to: channel, current: current, then: configure) }
        )
        let session = try await Self.awaitHandshake(handshake, on: opened)
        if let (identity, certificate) = session.firstUsePairing {
            do {
                try TLSContext.pairingStore(of: self.configuration.trust).remember(
                    identity: identity,
                    pin: certificate.spkiPin,
                    comment: "\(certificate.subject), first seen on \(self.inner)"
                )
            } catch {
                opened.channel.close(promise: nil)
                await opened.waitUntilReleased()
                throw error
            }
        }
        let renewal = Self.renewal(of: opened, context: context, current: current)
        return (opened.replacingRenewal(renewal), session)
    }

    /// A stream the layer below renews in band (a session restart) gets a new TLS connection on
    /// each renewal: the old one ended with the old stream.
    private static func renewal(
        of opened: OpenedByteStream,
        context: TLSContext,
        current: NIOLoopBoundBox<TLSHandler?>
    ) -> StreamRenewal? {
        guard opened.renewal != nil else { return nil }
        return { (configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>) async throws -> Void in
            let build: @Sendable (any Channel) -> EventLoopFuture<EventLoopFuture<TLSSessionInfo>> = { channel in
                let sync = channel.pipeline.syncOperations
                if let old = current.value, let oldContext = try? sync.context(handler: old) {
                    sync.removeHandler(context: oldContext, promise: nil)
                }
                return Self.addHandler(context, to: channel, current: current, then: configure)
            }
            let handshake = try await opened.renew(building: build)
            _ = try await Self.awaitHandshake(handshake, on: opened)
        }
    }

    /// Adds a TLS client handler for a new connection below the layer `configure` installs.
    private static func addHandler(
        _ context: TLSContext,
        to channel: any Channel,
        current: NIOLoopBoundBox<TLSHandler?>,
        then configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) -> EventLoopFuture<EventLoopFuture<TLSSessionInfo>> {
        let handshake: EventLoopFuture<TLSSessionInfo>
        do {
            let connection = try TLSConnection(context: context)
            let promise = channel.eventLoop.makePromise(of: TLSSessionInfo.self)
            let handler = TLSHandler(
                connection: connection,
                configuration: context.configuration,
                handshakePromise: promise
            )
            try handler.add(to: channel)
            current.value = handler
            handshake = promise.futureResult
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return configure(channel).map { handshake }
    }

    /// Waits for the handshake; on failure the stream is closed, the transport has released what
    /// it held (an `exec:` child reaped, a serial line restored) before this throws, and the
    /// error carries what the transport knows.
    private static func awaitHandshake(
        _ handshake: EventLoopFuture<TLSSessionInfo>,
        on opened: OpenedByteStream
    ) async throws -> TLSSessionInfo {
        try await opened.awaitOpeningStep(handshake, explaining: TLSError.self) { error, diagnostics in
            TLSError(error.code, "\(error.message) (\(diagnostics))")
        }
    }

    /// Connects once without trusting anything, to show the user the accessory's chain before
    /// pairing (`accessory-http trust`). No application data is exchanged; the connection is
    /// closed right after the handshake.
    public static func fetchCertificates(
        from inner: any ByteStreamTransport,
        serverName: String? = nil,
        identity: TLSIdentity? = nil,
        minimumVersion: TLSVersion = .v1_2,
        on eventLoop: any EventLoop
    ) async throws -> TLSSessionInfo {
        var trust = TLSTrust(useSystemRoots: false, trustStore: nil)
        trust.insecureSkipVerification = true
        let transport = TLSTransport(
            wrapping: inner,
            configuration: .client(
                serverName: serverName,
                trust: trust,
                identity: identity,
                minimumVersion: minimumVersion
            )
        )
        let (stream, session) = try await transport.openSession(on: eventLoop) {
            $0.eventLoop.makeSucceededVoidFuture()
        }
        try? await stream.channel.close()
        await stream.waitUntilReleased()  // `trust` exits next: no device left behind
        return session
    }
}

/// A server's TLS context, made once from a configuration, for pipelines that accept many
/// connections (``TLSServerContext/channelInitializer``).
public struct TLSServerContext: Sendable {
    let context: TLSContext

    /// Loads the certificate, key and client CAs.
    /// - Throws: ``TLSError`` (``TLSError/Code/invalidConfiguration``) naming the bad file.
    public init(configuration: TLSConfiguration) throws(TLSError) {
        guard configuration.role == .server else {
            throw TLSError(.invalidConfiguration, "TLSServerContext needs a server configuration")
        }
        self.context = try TLSContext(configuration: configuration)
    }

    /// Adds a fresh ``TLSHandler`` at the end of `channel`'s pipeline and returns it: for a
    /// responder that runs a new TLS connection on every session of one byte stream (TLS inside
    /// the session layer, docs/framing.md §8). Call on the channel's event loop.
    public func addHandler(to channel: any Channel) throws -> TLSHandler {
        let handler = try TLSHandler.make(context: self, eventLoop: channel.eventLoop)
        try handler.add(to: channel)
        // A failed handshake is logged by nobody else; the handler has ended the stream.
        handler.handshakeFuture?.whenFailure { _ in }
        return handler
    }

    /// Adds a ``TLSHandler`` at the front of a new connection's pipeline. Use it as the
    /// per-connection initializer of a listener (for example
    /// `HTTPResponder.serveUnixSocket(path:group:channelInitializer:)`).
    public var channelInitializer: @Sendable (any Channel) -> EventLoopFuture<Void> {
        let context = self
        return { channel in
            channel.eventLoop.makeCompletedFuture {
                let handler = try TLSHandler.make(context: context, eventLoop: channel.eventLoop)
                try handler.add(to: channel)
                // A failed handshake is logged by nobody else; the handler has closed the link.
                handler.handshakeFuture?.whenFailure { _ in }
            }
        }
    }
}
