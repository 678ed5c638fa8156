import AccessoryClient
import AccessoryTransport
import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#endif

/// One end of a socketpair that stays as it is across opens, like a serial line: every `open` is
/// a `dup` of it, so whatever the device still sends after a host gave up waits there for the
/// next open. Counts nothing; the link's `openCount` and `renewalCount` tell what happened.
public struct SharedLineEnd: ByteStreamTransport {
    public let descriptor: CInt
    public var description: String { "shared-socketpair" }
    public var reopenMayCarryStaleBytes: Bool { true }
    public var opensIndependentStreams: Bool { false }

    public init(descriptor: CInt) { self.descriptor = descriptor }

    public func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        let copy = dup(self.descriptor)
        guard copy >= 0 else { throw TransportError(.openFailed, "dup: \(String(cString: strerror(errno)))") }
        let channel = try await NIOPipeBootstrap(group: eventLoop)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .channelInitializer(configure)
            .takingOwnershipOfDescriptor(inputOutput: copy)
            .get()
        return OpenedByteStream(channel: channel, sendQueue: KernelSendQueue(descriptor: copy))
    }
}

extension AccessoryClient {
    /// Starts a download of 1 GB and gives it up after its first megabyte; returns how many bytes
    /// were read (at least 1 MiB unless the body failed first).
    public func abandonLargeDownload() async throws -> Int {
        try await self.execute(try AccessoryRequest(url: "/bytes/1000000000")) { response in
            var count = 0
            for try await chunk in response.body {
                count += chunk.readableBytes
                if count >= 1 << 20 { break }
            }
            return count
        }
    }
}
