import Glibc
import NIOCore
import NIOPosix

/// Connects to a unix-domain stream socket, such as one an accessory's bridge or a
/// `socat UNIX-LISTEN:…` listens on. Each `open` makes a new connection.
public struct UnixSocketTransport: ByteStreamTransport {
    /// The socket's path; a relative path is resolved against the working directory.
    public let path: String
    /// How long `open` waits for the server to accept the connection.
    public let connectTimeout: Duration

    /// A transport that connects to the socket at `path`. Nothing is checked until `open`.
    ///
    /// - Parameters:
    ///   - path: The socket's path; a relative path is resolved against the working directory.
    ///   - connectTimeout: How long `open` waits for the server to accept the connection; 5 seconds
    ///     by default.
    public init(path: String, connectTimeout: Duration = .seconds(5)) {
        self.path = path
        self.connectTimeout = connectTimeout
    }

    public var description: String { "unix:\(self.path)" }

    /// Each open is a new connection: the server sees a new client.
    public var opensIndependentStreams: Bool { true }

    public func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        try self.checkPath()
        do {
            let channel = try await ClientBootstrap(group: eventLoop)
                .connectTimeout(TimeAmount(self.connectTimeout))
                .channelInitializer(configure)
                .connect(unixDomainSocketPath: self.path)
                .get()
            return OpenedByteStream(channel: channel)
        } catch {
            throw self.translate(error)
        }
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
