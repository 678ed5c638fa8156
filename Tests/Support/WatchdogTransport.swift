import AccessoryTransport
import NIOCore
import Synchronization

/// A transport that ends its first stream itself, `after` it opened, with a write timeout as the
/// stream's end cause (``OpenedByteStream/endCause``): what the USB bridge's watchdog does when
/// the device takes none of the OUT transfers for `write-timeout` seconds. Later streams are
/// left alone.
public struct WatchdogTransport: ByteStreamTransport {
    /// The reason the first stream ends with, as the USB bridge words it.
    public static let reason = "writing to the test device timed out after 200 ms (the device stopped reading)"

    let inner: any ByteStreamTransport
    let after: Duration
    private let opens = Flag()
    public var description: String { "watchdog \(self.inner)" }
    public var reopenMayCarryStaleBytes: Bool { self.inner.reopenMayCarryStaleBytes }
    public var opensIndependentStreams: Bool { self.inner.opensIndependentStreams }
    public var reopenWaitsForRelease: Bool { self.inner.reopenWaitsForRelease }

    /// A transport over `inner` whose first stream the transport ends `after` it opened.
    public init(inner: any ByteStreamTransport, after: Duration) {
        self.inner = inner
        self.after = after
    }

    public func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        let stream = try await self.inner.open(on: eventLoop, configure: configure)
        guard self.opens.raise() else { return stream }
        let timedOut = Flag()
        stream.channel.eventLoop.scheduleTask(in: TimeAmount(self.after)) {
            _ = timedOut.raise()
            stream.channel.close(promise: nil)
        }
        return OpenedByteStream(
            channel: stream.channel,
            diagnostics: { timedOut.isRaised ? Self.reason : nil },
            released: { await stream.waitUntilReleased() },
            sendQueue: stream.sendQueue,
            endCause: { timedOut.isRaised ? TransportError(.writeTimedOut, Self.reason) : nil }
        )
    }
}

/// A flag raised once.
private final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    /// Raises the flag; `true` if this call did.
    func raise() -> Bool { !self.value.exchange(true, ordering: .acquiringAndReleasing) }
    var isRaised: Bool { self.value.load(ordering: .acquiring) }
}
