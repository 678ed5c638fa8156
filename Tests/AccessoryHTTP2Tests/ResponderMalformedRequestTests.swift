import AccessoryResponder
import AccessoryTestSupport
import Glibc
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import Testing

/// A malformed request head (a `:method` that is not a token) is refused on its own stream with
/// RST_STREAM PROTOCOL_ERROR (RFC 9113 §8.1.1: swift-nio-http2's header checks on the device),
/// and the connection serves the next request. The host here is swift-nio-http2's own client
/// handler with its header checks off, writing frames by hand on a socketpair to the responder.
@Suite("HTTP/2 malformed requests on the device", .timeLimit(.minutes(1)))
struct ResponderMalformedRequestTests {
    /// Collects each stream's frames until END_STREAM or a reset, and hands them over.
    final class StreamFrames: ChannelInboundHandler {
        typealias InboundIn = HTTP2Frame
        private var frames: [HTTP2StreamID: [HTTP2Frame.FramePayload]] = [:]
        private var waiting: [HTTP2StreamID: EventLoopPromise<[HTTP2Frame.FramePayload]>] = [:]

        func expect(_ id: HTTP2StreamID, promise: EventLoopPromise<[HTTP2Frame.FramePayload]>) {
            self.waiting[id] = promise
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = self.unwrapInboundIn(data)
            guard frame.streamID != .rootStream else { return }
            self.frames[frame.streamID, default: []].append(frame.payload)
            let ends: Bool
            switch frame.payload {
            case .headers(let headers): ends = headers.endStream
            case .data(let data): ends = data.endStream
            case .rstStream: ends = true
            default: ends = false
            }
            if ends, let promise = self.waiting.removeValue(forKey: frame.streamID) {
                promise.succeed(self.frames[frame.streamID] ?? [])
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            for promise in self.waiting.values { promise.fail(ChannelError.ioOnClosedChannel) }
            self.waiting.removeAll()
            context.fireChannelInactive()
        }
    }

    @Test func aMethodThatIsNotATokenIsRefusedOnItsStreamAndTheNextRequestServed() async throws {
        var descriptors: [CInt] = [0, 0]
        #expect(socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue), 0, &descriptors) == 0)
        let responder = HTTPResponder { request in
            ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "fine \(request.head.path ?? "")")))
        }
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let (deviceEnd, hostEnd) = (descriptors[0], descriptors[1])
        let serving = Task { try await responder.serve(descriptor: deviceEnd, on: eventLoop) }
        let connection = {
            var connection = NIOHTTP2Handler.ConnectionConfiguration()
            connection.headerBlockValidation = .disabled
            return connection
        }()
        let frames = NIOLoopBoundBox.makeBoxSendingValue(StreamFrames(), eventLoop: eventLoop)
        let channel = try await NIOPipeBootstrap(group: eventLoop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers(
                        NIOHTTP2Handler(mode: .client, connectionConfiguration: connection),
                        frames.value
                    )
                }
            }
            .takingOwnershipOfDescriptor(inputOutput: hostEnd).get()
        let watchdog = eventLoop.scheduleTask(in: .seconds(20)) { channel.close(promise: nil) }
        defer { watchdog.cancel() }

        func exchange(
            _ id: Int,
            method: String,
            path: String
        ) async throws -> (status: String?, body: String, reset: HTTP2ErrorCode?) {
            let streamID = HTTP2StreamID(id)
            let answer = eventLoop.makePromise(of: [HTTP2Frame.FramePayload].self)
            let headers = HPACKHeaders([
                (":method", method), (":scheme", "http"), (":authority", "accessory"), (":path", path),
            ])
            try await eventLoop.submit {
                frames.value.expect(streamID, promise: answer)
                channel.writeAndFlush(
                    HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: true))),
                    promise: nil
                )
            }.get()
            var status: String?
            var reset: HTTP2ErrorCode?
            var body = ByteBuffer()
            for payload in try await answer.futureResult.get() {
                switch payload {
                case .headers(let block): status = status ?? block.headers.first(name: ":status")
                case .data(let data):
                    if case .byteBuffer(var bytes) = data.data { body.writeBuffer(&bytes) }
                case .rstStream(let code): reset = code
                default: break
                }
            }
            return (status, String(buffer: body), reset)
        }

        for round in 0..<16 {
            let bad = try await exchange(1 + 4 * round, method: "GE T", path: "/status")
            #expect(bad.status == nil && bad.reset == .protocolError, "round \(round): \(bad)")
            let next = try await exchange(3 + 4 * round, method: "GET", path: "/next")
            #expect(
                next.status == "200" && next.body == "fine /next" && next.reset == nil,
                "round \(round): \(next)"
            )
        }
        try await channel.close()
        _ = try? await serving.value
    }
}
