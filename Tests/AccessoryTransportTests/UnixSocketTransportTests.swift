import Glibc
import NIOCore
import NIOPosix
import Testing

@testable import AccessoryTransport

@Suite struct UnixSocketTransportTests {
    /// Echoes every byte back, standing in for an accessory's server.
    private final class Echo: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            context.writeAndFlush(data, promise: nil)
        }
    }

    @Test func exchangesBytesWithAServer() async throws {
        let path = temporaryPath(".sock")
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Echo()) }
            }
            .bind(unixDomainSocketPath: path, cleanupExistingSocketFile: true)
            .get()
        defer {
            server.close(promise: nil)
            unlink(path)
        }

        let received = ReceivedBytes()
        let stream = try await UnixSocketTransport(path: path).open(on: testEventLoop, configure: received.configure)
        try await stream.channel.writeText("hello over unix")
        #expect(await eventually { received.text == "hello over unix" })
        try await stream.channel.close()
    }

    /// The stream knows its kernel send queue (the session opener's way of telling a device that
    /// reads slowly from a dead one): what the server has not read yet, 0 once it read it all.
    /// Before 2026-11-30 NIO connected the socket and `unix:` had no send queue.
    @Test func reportsWhatTheServerHasNotRead() async throws {
        let path = temporaryPath(".sock")
        let listener = try Self.boundSocket(at: path)
        defer {
            close(listener)
            unlink(path)
        }
        try #require(listen(listener, 4) == 0)

        let stream = try await UnixSocketTransport(path: path).open(
            on: testEventLoop,
            configure: ReceivedBytes().configure
        )
        let server = accept(listener, nil, nil)
        try #require(server >= 0)
        defer { close(server) }
        let queue = try #require(stream.sendQueue)
        let channel = stream.channel
        try await channel.writeAndFlush(ByteBuffer(repeating: 7, count: 3000))
        let waiting = try await channel.eventLoop.submit { queue.unsentBytes() }.get()
        #expect((waiting ?? 0) >= 3000)
        var sink = [UInt8](repeating: 0, count: 4096)
        #expect(sink.withUnsafeMutableBytes { read(server, $0.baseAddress, $0.count) } == 3000)
        let left = try await channel.eventLoop.submit { queue.unsentBytes() }.get()
        #expect(left == 0)
        try await channel.close()
    }

    @Test func missingPath() async {
        let path = temporaryPath(".sock")
        let error = await transportError {
            _ = try await UnixSocketTransport(path: path).open(on: testEventLoop, configure: ReceivedBytes().configure)
        }
        #expect(error?.code == .deviceNotFound)
        #expect(error?.message == "no socket at \(path); is the accessory's server running?")
    }

    @Test func socketWithoutListenerIsRefused() async throws {
        // A socket file left behind by a server that exited: bound, never listening.
        let path = temporaryPath(".sock")
        let fd = try Self.boundSocket(at: path)
        defer {
            close(fd)
            unlink(path)
        }

        let error = await transportError {
            _ = try await UnixSocketTransport(path: path).open(on: testEventLoop, configure: ReceivedBytes().configure)
        }
        #expect(error?.code == .openFailed)
        #expect(error?.message.contains("connection refused") == true)
    }

    /// A unix stream socket bound at `path`, not listening yet.
    static func boundSocket(at path: String) throws -> CInt {
        let fd = socket(AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
        try #require(fd >= 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { bytes in
            for (index, byte) in path.utf8.enumerated() { bytes[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else {
            close(fd)
            throw TransportError(.openFailed, "could not bind \(path) for the test")
        }
        return fd
    }

    @Test func regularFileIsTheWrongKind() async throws {
        let path = temporaryPath(".txt")
        let fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
        try #require(fd >= 0)
        close(fd)
        defer { unlink(path) }
        let error = await transportError {
            _ = try await UnixSocketTransport(path: path).open(on: testEventLoop, configure: ReceivedBytes().configure)
        }
        #expect(error?.code == .wrongKindOfFile)
    }
}
