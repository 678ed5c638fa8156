import NIOCore
import Synchronization

/// A way to open a pair of byte streams to an accessory: one to write requests into and one to
/// read responses from. Every transport (socketpair, unix socket, child process, serial tty,
/// USB bulk endpoints) reduces to this, so the HTTP layer above never knows which it drives.
///
/// `open` may be called many times: the HTTP layer reopens the stream after a framing error or
/// a response it could not drain, so that stale bytes are never read as the next response.
public protocol ByteStreamTransport: Sendable, CustomStringConvertible {
    /// Opens a fresh byte stream pair as a NIO channel on `eventLoop`.
    ///
    /// - Parameters:
    ///   - eventLoop: the event loop the channel is registered on.
    ///   - configure: installs the protocol handlers; it runs on the channel's event loop
    ///     before the channel becomes active, so no byte is read before the pipeline is complete.
    /// - Throws: ``TransportError`` with a message that names the device and the fix.
    func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream

    /// Whether a reopened stream can still deliver bytes sent before it was closed.
    ///
    /// A socketpair or a new child process starts empty; a serial line or USB endpoint is the
    /// same wire, so the layer above must discard input until the line is quiet.
    var reopenMayCarryStaleBytes: Bool { get }

    /// Whether an open must wait until the stream opened before it has released the device.
    ///
    /// A claimed USB interface, a locked tty or this process's stdio is held until the closed
    /// stream's transport lets go of it (``OpenedByteStream/waitUntilReleased()``), a moment after
    /// the channel closed; opened meanwhile, the device looks busy (claimed, locked) to this
    /// process itself. A link waits for that before it opens such a transport again.
    var reopenWaitsForRelease: Bool { get }

    /// Whether every `open` gives a stream independent of the ones before it, cheaply: a new
    /// connection to a unix socket, a new socketpair. Then an abandoned response (a cancel, a
    /// timeout, a body the caller stopped reading) is never drained: the link closes that
    /// stream at once and the next request goes out on a fresh one. A serial line, USB
    /// endpoints, stdio or a child's pipes (the command may reach a shared line) are one wire:
    /// `false`, and the link drains.
    var opensIndependentStreams: Bool { get }

    /// The line's rate in bytes per second, when the transport knows it is slow (a serial line:
    /// its baud rate / 10); `nil` for a fast or unknown one. Layers above size what they send
    /// in one piece by it: HTTP/2 asks for small frames on a slow line, so a small exchange
    /// never waits seconds behind one frame of a bulk transfer.
    var bytesPerSecond: Int? { get }
}

extension ByteStreamTransport {
    public var reopenMayCarryStaleBytes: Bool { false }
    public var reopenWaitsForRelease: Bool { false }
    public var opensIndependentStreams: Bool { false }
    public var bytesPerSecond: Int? { nil }

    /// Opens a stream like ``open(on:configure:)`` and also returns what `configure` built in
    /// the pipeline (a handler, a handshake future), as NIO's
    /// `NIOPipeBootstrap.takingOwnershipOfDescriptor<Output>` does: callers need no slot of
    /// their own to carry it out of the closure.
    ///
    /// - Throws: what the transport's `open` throws, what `configure` fails with, or a
    ///   ``TransportError`` (``TransportError/Code/openFailed``) if the transport returned a
    ///   channel without running `configure` (a transport bug; the channel is closed).
    public func open<Output: Sendable>(
        on eventLoop: any EventLoop,
        building configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Output>
    ) async throws -> (stream: OpenedByteStream, output: Output) {
        let built = BuiltOutput<Output>()
        let stream = try await self.open(on: eventLoop) { channel in
            configure(channel).map { built.store($0) }
        }
        guard let output = built.take() else {
            stream.channel.close(promise: nil)
            throw TransportError(.openFailed, "\(self) opened a channel without running the pipeline set-up")
        }
        return (stream, output)
    }
}

/// Carries what a `configure` closure built out to ``ByteStreamTransport/open(on:building:)``
/// (and ``OpenedByteStream/renew(building:)``), since ``ByteStreamTransport/open(on:configure:)`` itself is
/// not generic (a generic requirement would make every transport carry the type through).
final class BuiltOutput<Output: Sendable>: Sendable {
    private let value = TrackedMutex<Output?>(nil)

    func store(_ output: Output) { self.value.withLock { $0 = output } }

    func take() -> Output? {
        self.value.withLock { value in
            defer { value = nil }
            return value
        }
    }
}

/// A byte stream pair that is open: the channel that carries it, and what the transport can
/// add to an error message when it fails (a child's exit status and stderr, for instance).
public struct OpenedByteStream: Sendable {
    /// The NIO channel that carries the stream; closing it ends the stream.
    public let channel: any Channel
    private let diagnosticsProvider: @Sendable () async -> String?
    private let endCauseProvider: @Sendable () -> TransportError?
    private let releasedProvider: (@Sendable () async -> Void)?
    /// Starts a new stream on the same open transport (see ``renew(building:)``); `nil` when
    /// the transport cannot.
    public let renewal: StreamRenewal?
    /// The kernel's send queue under the channel, when the transport knows its descriptor (or a
    /// count of its own, for USB: the bytes in OUT transfers not back yet): what the device has
    /// not taken yet of the bytes that left the channel's own buffer.
    public let sendQueue: KernelSendQueue?

    /// A stream open on `channel`.
    ///
    /// - Parameters:
    ///   - channel: the channel that carries the stream.
    ///   - diagnostics: what the transport can add to an error message after a failure.
    ///   - released: waits until everything the stream held is given back after the channel
    ///     closed (a child reaped, a tty's settings restored and its lock released). `nil`:
    ///     closing the channel releases everything.
    ///   - renewal: starts a new, clean stream on the same channel (a session layer's restart
    ///     in band); `nil` when the only way to a clean stream is to close and open again.
    ///   - sendQueue: the kernel's send queue of the descriptor the channel writes to (or the
    ///     transport's own count).
    ///   - endCause: the transport's own finding that ended the stream, once it has (a USB
    ///     write timeout: ``TransportError/Code/writeTimedOut``); `nil` while the stream is open
    ///     or when it ended for another reason (the device closed it, an unplug).
    public init(
        channel: any Channel,
        diagnostics: @escaping @Sendable () async -> String? = { nil },
        released: (@Sendable () async -> Void)? = nil,
        renewal: StreamRenewal? = nil,
        sendQueue: KernelSendQueue? = nil,
        endCause: @escaping @Sendable () -> TransportError? = { nil }
    ) {
        self.channel = channel
        self.diagnosticsProvider = diagnostics
        self.endCauseProvider = endCause
        self.releasedProvider = released
        self.renewal = renewal
        self.sendQueue = sendQueue
    }

    /// The same stream with its renewal replaced: for a layer that wraps the stream (TLS) and
    /// must take part in every renewal.
    public func replacingRenewal(_ renewal: StreamRenewal?) -> OpenedByteStream {
        OpenedByteStream(
            channel: self.channel,
            diagnostics: self.diagnosticsProvider,
            released: self.releasedProvider,
            renewal: renewal,
            sendQueue: self.sendQueue,
            endCause: self.endCauseProvider
        )
    }

    /// Waits until the channel has closed and the transport has released what it held, so a
    /// process can exit without leaving a child running or a serial line in raw mode.
    public func waitUntilReleased() async {
        try? await self.channel.closeFuture.get()
        await self.releasedProvider?()
    }

    /// The transport's own finding that ended the stream (a USB write timeout), if it ended it:
    /// the HTTP link reports that finding's kind (a timeout, not "the device closed the link").
    public var endCause: TransportError? { self.endCauseProvider() }

    /// Facts about why the stream ended, if the transport knows any (it may wait briefly for a
    /// child process to exit). `nil` when there is nothing to add.
    public func diagnostics() async -> String? { await self.diagnosticsProvider() }

    /// ``diagnostics()``, given up at `deadline` (then `nil`): the facts wait briefly for a child
    /// to exit (up to a second for a USB unplug to show), and a caller's deadline comes first.
    ///
    /// - Parameter deadline: when the caller's call must have ended; `nil` waits as long as
    ///   ``diagnostics()`` does.
    public func diagnostics(until deadline: NIODeadline?) async -> String? {
        guard let deadline else { return await self.diagnostics() }
        let remaining = deadline - .now()
        // Every transport's facts come within about a second; a later deadline cannot cut them.
        guard remaining < .seconds(2) else { return await self.diagnostics() }
        guard remaining > .zero else { return nil }
        let found = TrackedMutex<String?>(nil)
        let asking = Task {
            let facts = await self.diagnostics()
            found.withLock { $0 = facts }
        }
        await waitForTasks([asking], atMost: .nanoseconds(remaining.nanoseconds))
        asking.cancel()
        return found.withLock { $0 }
    }
}
