import AccessoryClient
import AccessoryEmulator
import AccessoryHTTP1
import AccessoryTransport
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import AccessoryHTTP2

/// The link asks its device for DATA frames sized by the line's rate: 64 KiB where the rate is
/// unknown or fast, HTTP/2's minimum of 16 KiB on a slow line, where one frame is what a small
/// exchange waits behind. Read from the frames the device really sent (`-v`'s trace).
@Suite("HTTP/2 frame size by line rate", .timeLimit(.minutes(1)))
struct HTTP2FrameSizeTests {
    /// A socketpair to the emulator that reports the rate it is given, and reads every frame
    /// the device sends (`-v` shows only a body's last DATA frame).
    struct RatedTransport: ByteStreamTransport {
        let inner: SocketPairTransport
        let bytesPerSecond: Int?
        let lines: FrameLines
        var description: String { "rated \(self.inner)" }

        func open(
            on eventLoop: any EventLoop,
            configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
        ) async throws -> OpenedByteStream {
            let lines = self.lines
            return try await self.inner.open(on: eventLoop) { channel in
                do {
                    try channel.pipeline.syncOperations.addHandler(FrameReader(lines: lines))
                } catch {
                    return channel.eventLoop.makeFailedFuture(error)
                }
                return configure(channel)
            }
        }
    }

    final class FrameLines: Sendable {
        let lines = TrackedMutex<[String]>([])
    }

    final class FrameReader: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias InboundOut = ByteBuffer
        let lines: FrameLines
        var scanner = HTTP2FrameScanner(client: false)
        init(lines: FrameLines) { self.lines = lines }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let found = self.scanner.scan(self.unwrapInboundIn(data))
            self.lines.lines.withLock { $0 += found }
            context.fireChannelRead(data)
        }
    }

    /// The largest DATA frame the device sent for a 1 MiB body, and the SETTINGS the link sent.
    func frames(bytesPerSecond: Int?) async throws -> (largestData: Int, settings: String) {
        let received = FrameLines()
        let notes = TrackedMutex<[String]>([])
        var configuration = AccessoryClient.Configuration()
        configuration.link.httpVersion = .http2
        configuration.link.tracer = LinkTracer { event in
            if case .note(let text) = event { notes.withLock { $0.append(text) } }
        }
        let client = AccessoryClient(
            transport: RatedTransport(
                inner: EmulatedAccessory().socketPairTransport(on: MultiThreadedEventLoopGroup.singleton),
                bytesPerSecond: bytesPerSecond,
                lines: received
            ),
            configuration: configuration
        )
        let (head, body) = try await client.get("/bytes/1048576", maxBodySize: 2 << 20)
        await client.shutdown()
        #expect(head.status == .ok && body.readableBytes == 1 << 20)
        let largest =
            received.lines.withLock { $0 }.filter { $0.hasPrefix("DATA ") }.compactMap { line in
                line.split(separator: " ").first { $0.hasPrefix("len=") }.flatMap { Int($0.dropFirst(4)) }
            }.max() ?? 0
        let settings = notes.withLock { $0 }.first { $0.hasPrefix("> h2 SETTINGS") } ?? "no SETTINGS sent"
        return (largest, settings)
    }

    @Test func aLineOfUnknownRateGets64KiBFrames() async throws {
        let (largest, settings) = try await self.frames(bytesPerSecond: nil)
        #expect(largest == 65536, "\(settings)")
        #expect(settings.contains("MAX_FRAME_SIZE=65536"), "\(settings)")
    }

    @Test func aSlowLineGetsTheSmallestFrames() async throws {
        let (largest, settings) = try await self.frames(bytesPerSecond: 11_520)
        #expect(largest == 16384, "\(settings)")
        #expect(settings.contains("MAX_FRAME_SIZE=16384"), "\(settings)")
    }

    @Test func aSerialLineReportsItsRate() {
        let line = SerialTransport(path: "/dev/null", settings: SerialSettings(baudRate: 115_200))
        #expect(line.bytesPerSecond == 11_520)
        #expect(TransportRateCheck.of(line) == 11_520)
    }
}

/// The rate as the layers above see it: through the protocol, not the concrete type.
enum TransportRateCheck {
    static func of(_ transport: any ByteStreamTransport) -> Int? { transport.bytesPerSecond }
}
