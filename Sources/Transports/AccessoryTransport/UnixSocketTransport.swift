import Glibc
import NIOCore
import NIOPosix

/// Connects to a unix-domain stream socket, such as one an accessory's bridge or a
/// `socat UNIX-LISTEN:…` listens on. Each `open` makes a new connection.
public struct UnixSocketTransport: ByteStreamTransport {
    /// The socket's path; a relative path is resolved against the working directory.
    public let path: String
    /// How long `open` may wait for the server to accept the connection. A unix socket's connect
    /// does not wait on Linux (a full backlog is reported at once), so this bounds nothing today;
    /// it is kept for callers that set it.
    public let connectTimeout: Duration

    /// A transport that connects to the socket at `path`. Nothing is checked until `open`.
    ///
    /// - Parameters:
    ///   - path: The socket's path; a relative path is resolved against the working directory.
    ///   - connectTimeout: How long `open` may wait for the server to accept the connection; 5
    ///     seconds by default (a unix socket's connect does not wait on Linux: see
    ///     ``connectTimeout``).
    public init(path: String, connectTimeout: Duration = .seconds(5)) {
        self.path = path
        self.connectTimeout = connectTimeout
    }

    public var description: String { "unix:\(self.path)" }

    /// Each open is a new connection: the server sees a new client.
    public var opensIndependentStreams: Bool { true }

    /// The socket is connected here, not by NIO, so that the stream knows its descriptor and
    /// with it the kernel's send queue (``OpenedByteStream/sendQueue``: how a session opener tells
    /// a device that reads slowly from a dead one). A unix socket's connect never waits: it
    /// succeeds, is refused, or finds the server's backlog full at once.
    public func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        try self.checkPath()
        let descriptor = try self.connectedSocket()
        let sendQueue = KernelSendQueue(descriptor: descriptor)
        do {
            // NIO owns the descriptor from here, and closes it with the channel (or at once if
            // the channel's set-up fails).
            let channel = try await ClientBootstrap(group: eventLoop)
                .channelInitializer(configure)
                .withConnectedSocket(descriptor)
                .get()
            return OpenedByteStream(channel: channel, sendQueue: sendQueue)
        } catch {
            throw self.translate(error)
        }
    }

    /// A non-blocking stream socket connected to ``path``.
    private func connectedSocket() throws(TransportError) -> CInt {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(self.path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw self.translate(SocketAddressError.unixDomainSocketPathTooLong)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        let descriptor = socket(
            AF_UNIX,
            CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue) | CInt(SOCK_NONBLOCK.rawValue),
            0
        )
        guard descriptor >= 0 else { throw self.translate(errno: errno, while: "making a socket to connect to") }
        var result: CInt
        repeat {
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
        } while result != 0 && errno == EINTR
        guard result == 0 else {
            let code = errno
            close(descriptor)
            throw self.translate(errno: code, while: "connecting to")
        }
        return descriptor
    }

    /// Explains a missing path or a path that is not a socket before NIO reports a bare errno.
    private func checkPath() throws(TransportError) {
        let kind: FileKind
        do {
            kind = try FileKind.of(path: self.path)
        } catch {
            throw self.translate(errno: error.rawValue, while: "looking for the socket")
        }
        guard kind == .socket else {
            throw TransportError(
                .wrongKindOfFile,
                "\(self.path) is \(kind), not a unix socket; check the path of the accessory's socket"
            )
        }
    }

    private func translate(_ error: any Error) -> TransportError {
        switch error {
        case let error as TransportError:
            return error
        case let error as IOError:
            return self.translate(errno: error.errnoCode, while: "connecting")
        case ChannelError.connectTimeout(let timeout):
            return TransportError(
                .openTimedOut,
                "connecting to the socket \(self.path) did not finish within \(timeout.nanoseconds / 1_000_000) ms; is the accessory's server stuck?"
            )
        case SocketAddressError.unixDomainSocketPathTooLong:
            return TransportError(
                .openFailed,
                "the socket path \(self.path) is longer than unix sockets allow (107 bytes); use a shorter path or a symbolic link to it"
            )
        default:
            return TransportError(.openFailed, "could not connect to the socket \(self.path): \(error)")
        }
    }

    private func translate(errno code: CInt, while action: String) -> TransportError {
        let reason = Errno(rawValue: code)
        switch code {
        case ENOENT, ENOTDIR:
            return TransportError(.deviceNotFound, "no socket at \(self.path); is the accessory's server running?")
        case ECONNREFUSED:
            return TransportError(
                .openFailed,
                "nothing accepts connections on \(self.path) (connection refused); the server may have exited and left its socket file behind"
            )
        case EACCES, EPERM:
            return TransportError(
                .permissionDenied,
                "no permission to connect to \(self.path) (\(reason)); you need write permission on the socket and search permission on its directories"
            )
        case EAGAIN:
            return TransportError(
                .deviceBusy,
                "the server on \(self.path) is not accepting connections fast enough (its backlog is full); try again"
            )
        default:
            return TransportError(.openFailed, "\(action) \(self.path) failed: \(reason)")
        }
    }
}
