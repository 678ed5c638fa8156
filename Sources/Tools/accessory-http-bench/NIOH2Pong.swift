import AccessoryHTTP2
import AccessoryTransport
import ArgumentParser
import Glibc
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import Synchronization

/// `nio-h2-pong RESPONSE_FILE`: the floor of an HTTP/2 responder built on NIO. It serves
/// stdin/stdout with swift-nio-http2 (prior knowledge) and answers every stream with the status,
/// fields and body of RESPONSE_FILE (a captured HTTP/1.1 `/status` response) from a frame-payload
/// handler on the event loop: no async code, no swift-http-types conversion, no routing.
struct NIOH2Pong: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "nio-h2-pong", shouldDisplay: false)
    @Argument var responseFile: String

    func run() async throws {
        let (headers, body) = try Benchmarks.h2Response(Sys.readFile(self.responseFile))
        // No half-closure: the client's end of input closes the channel, and the process ends.
        let channel = try await NIOPipeBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    _ = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                        mode: .server,
                        // The windows our link and responder use: the default 64 KiB makes a
                        // bulk body wait for a WINDOW_UPDATE every four frames.
                        connectionConfiguration: HTTP2Windows.configuration().connection,
                        streamConfiguration: HTTP2Windows.configuration().stream
                    ) { stream in
                        stream.eventLoop.makeCompletedFuture {
                            try stream.pipeline.syncOperations.addHandler(H2PongHandler(headers: headers, body: body))
                        }
                    }
                }
            }
            .takingOwnershipOfDescriptors(input: dup(0), output: dup(1))
            .get()
        try await channel.closeFuture.get()
    }
}

/// Answers a stream once its request ended.
private final class H2PongHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    let headers: HPACKHeaders
    let body: ByteBuffer

    init(headers: HPACKHeaders, body: ByteBuffer) {
        self.headers = headers
        self.body = body
    }

    /// The body size a `GET /bytes/N` asked for.
    private var bulkBytes: Int?
    /// What is left to write of that body.
    private var bulkLeft = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let ended: Bool
        switch self.unwrapInboundIn(data) {
        case .headers(let headers):
            ended = headers.endStream
            if let path = headers.headers.first(name: ":path"), path.hasPrefix("/bytes/") {
                self.bulkBytes = Int(path.dropFirst("/bytes/".count))
            }
        case .data(let data): ended = data.endStream
        default: ended = false
        }
        guard ended else { return }
        if let bulkBytes = self.bulkBytes {
            self.sendBulk(bulkBytes, context: context)
            return
        }
        context.write(self.wrapOutboundOut(.headers(.init(headers: self.headers))), promise: nil)
        context.writeAndFlush(
            self.wrapOutboundOut(.data(.init(data: .byteBuffer(self.body), endStream: true))),
            promise: nil
        )
    }
}

extension H2PongHandler {
    /// `count` zero bytes as 64 KiB DATA frames (slices of one buffer), written while the stream
    /// is writable and resumed when it is again, as our responder writes a bulk body.
    private func sendBulk(_ count: Int, context: ChannelHandlerContext) {
        let headers = HPACKHeaders([(":status", "200"), ("content-length", String(count))])
        context.write(self.wrapOutboundOut(.headers(.init(headers: headers, endStream: count == 0))), promise: nil)
        self.bulkLeft = count
        self.writeBulk(context: context)
    }

    private func writeBulk(context: ChannelHandlerContext) {
        while self.bulkLeft > 0 && context.channel.isWritable {
            let size = min(self.bulkLeft, Self.chunk.readableBytes)
            self.bulkLeft -= size
            let data = HTTP2Frame.FramePayload.Data(
                data: .byteBuffer(Self.chunk.getSlice(at: 0, length: size) ?? Self.chunk),
                endStream: self.bulkLeft == 0
            )
            context.write(self.wrapOutboundOut(.data(data)), promise: nil)
        }
        context.flush()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable && self.bulkLeft > 0 { self.writeBulk(context: context) }
        context.fireChannelWritabilityChanged()
    }

    private static let chunk = ByteBuffer(repeating: 0, count: 64 << 10)
}

extension Benchmarks {
    /// The status, fields and body of a captured HTTP/1.1 response, as HTTP/2 sends them.
    static func h2Response(_ text: String) throws -> (HPACKHeaders, ByteBuffer) {
        guard let split = text.range(of: "\r\n\r\n") else { throw BenchError("no head in the captured response") }
        let lines = text[..<split.lowerBound].split(separator: "\r\n")
        var headers = HPACKHeaders([(":status", "200")])
        for (name, value) in Self.headers(lines.dropFirst()) where name.lowercased() != "connection" {
            headers.add(name: name.lowercased(), value: value)
        }
        return (headers, ByteBuffer(string: String(text[split.upperBound...])))
    }
}
