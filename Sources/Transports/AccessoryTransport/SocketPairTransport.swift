import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// An in-process byte stream pair: each `open` makes a new `socketpair(AF_UNIX, SOCK_STREAM)`,
/// keeps one end for the channel and hands the other to `peer`, which then owns it.
///
/// The built-in emulated accessory and most tests use this: `peer` serves HTTP on its end.
public struct SocketPairTransport: ByteStreamTransport {
    /// Receives the accessory's end of a new socketpair. It owns the descriptor and must close it.
    public typealias Peer = @Sendable (_ descriptor: CInt) -> Void

    private let peer: Peer
    private let name: String
    /// Whether each open's far end is served on its own (the default), or the peer plays a
    /// single wire that must be drained, as a scripted device does.
    public let opensIndependentStreams: Bool

    /// A transport that hands the far end of every new socketpair to `peer`.
    ///
    /// - Parameters:
    ///   - name: What ``description`` prints, in messages and logs; `"socketpair"` by default.
    ///   - opensIndependentStreams: Whether each open's far end is served on its own; `true` by
    ///     default. Pass `false` when `peer` plays a single wire that must be drained.
    ///   - peer: Called by each `open`, before it returns, with the far end's descriptor, which it
    ///     then owns and must close.
    public init(name: String = "socketpair", opensIndependentStreams: Bool = true, peer: @escaping Peer) {
        self.name = name
        self.opensIndependentStreams = opensIndependentStreams
        self.peer = peer
    }

    public var description: String { self.name }

    public func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        let (local, remote) = try Self.makeSocketPair()
        let channel: any Channel
        let setUp = PipeSetUp(configure)
        do {
            channel = try await NIOPipeBootstrap(group: eventLoop)
                .channelInitializer(setUp.initializer)
                .takingOwnershipOfDescriptor(inputOutput: local)
                .get()
        } catch {
            // On failure NIO has not taken ownership: both ends are still ours.
            _ = close(local)
            _ = close(remote)
            throw TransportError(.openFailed, "could not attach a socketpair to the event loop: \(error)")
        }
        // NIO now owns `local` (it reads from it and writes to a dup of it) and closes both.
        do {
            try await setUp.check(channel)
        } catch {
            _ = close(remote)
            throw TransportError(.openFailed, "could not set up the pipeline on a socketpair: \(error)")
        }
        self.peer(remote)
        return OpenedByteStream(channel: channel, sendQueue: KernelSendQueue(descriptor: local))
    }

    /// Creates a connected pair of stream sockets, both close-on-exec.
    public static func makeSocketPair() throws -> (CInt, CInt) {
        var fds: [CInt] = [-1, -1]
        #if canImport(Glibc) || canImport(Musl)
            let type = CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue)
        #else
            let type = SOCK_STREAM
        #endif
        let result = fds.withUnsafeMutableBufferPointer { socketpair(AF_UNIX, type, 0, $0.baseAddress) }
        guard result == 0 else {
            throw TransportError(.openFailed, "socketpair() failed: \(String(cString: strerror(errno)))")
        }
        return (fds[0], fds[1])
    }
}
