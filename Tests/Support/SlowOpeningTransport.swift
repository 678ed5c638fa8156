import AccessoryTransport
import NIOCore

/// A transport whose open takes `delay` before it opens `inner`, and ignores cancellation
/// meanwhile (a serial adapter enumerating, a TLS or session handshake with a slow device): for
/// tests of a request's deadline while the link opens.
public struct SlowOpeningTransport: ByteStreamTransport {
    public let inner: any ByteStreamTransport
    public let delay: Duration
    public var description: String { "slow \(self.inner)" }

    public init(inner: any ByteStreamTransport, delay: Duration) {
        self.inner = inner
        self.delay = delay
    }

    public func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        let delay = self.delay
        // Deliberately not cancellable: the caller cannot reach this detached sleep.
        try await Task.detached { try await Task.sleep(for: delay) }.value
        return try await self.inner.open(on: eventLoop, configure: configure)
    }
}
