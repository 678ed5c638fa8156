import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import NIOHTTPTypes

@testable import AccessoryHTTP2

/// The host's HTTP/2 response path: one to three streams open on the link's frame-level pipeline
/// (`NIOHTTP2Handler` as a client, `HTTP2ClientStreams`) on an embedded channel, and the
/// fuzzer's bytes come back as the device's side of the connection, cut into reads. Between
/// reads each exchange takes what arrived (returning flow-control credit), and some give up on
/// their stream (a reset), as callers do.
///
/// Beyond "no crash, no hang" (swift-nio-http2's own assertions are on in this build) it asserts
/// what an exchange relies on: a stream's parts start with a head and end with at most one end,
/// nothing follows it, and once the line closes every stream has ended.
enum HTTP2ResponsePathTarget {
    /// The empty SETTINGS frame a device's connection starts with.
    static let serverPreface: [UInt8] = [0, 0, 0, 4, 0, 0, 0, 0, 0]

    static func run(_ input: inout FuzzInput) {
        let channel = EmbeddedChannel()
        Self.exchanges(&input, on: channel)
        _ = try? channel.finish()
        channel.embeddedEventLoop.run()
        try? channel.embeddedEventLoop.syncShutdownGracefully()
    }

    private static func exchanges(_ input: inout FuzzInput, on channel: EmbeddedChannel) {
        let options = input.byte()
        let cancels = input.byte()
        let settings = HTTP2Windows.configuration()
        let table = HTTP2ClientStreams(connectionWindow: HTTP2Windows.connection)
        let loop = channel.embeddedEventLoop
        var streams: [(stream: ClientStream, seen: StreamRecord)] = []
        do {
            try channel.pipeline.syncOperations.addHandlers(
                NIOHTTP2Handler(
                    mode: .client,
                    frameDelegate: table,
                    connectionConfiguration: settings.connection,
                    streamConfiguration: settings.stream
                ),
                table
            )
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
            for index in 0..<(Int(options % 3) + 1) {
                let stream = try table.openStream(idleTimeout: .seconds(30), deadline: nil)
                let request = HTTPRequest(method: .get, scheme: "http", authority: "accessory", path: "/\(index)")
                table.write(
                    .headers(.init(headers: HTTP2Fields.block(request), endStream: true)),
                    on: stream,
                    flush: true,
                    promise: nil
                )
                streams.append((stream, StreamRecord()))
            }
        } catch {
            FuzzCheck.require(false, "the embedded HTTP/2 link could not be set up: \(error)")
        }
        if options & 0x10 == 0 { _ = try? channel.writeInbound(ByteBuffer(bytes: Self.serverPreface)) }
        for (index, read) in input.reads().enumerated() {
            _ = try? channel.writeInbound(read)
            loop.run()
            while (try? channel.readOutbound(as: IOData.self)) != nil {}
            for (position, entry) in streams.enumerated() {
                entry.seen.take(entry.stream)
                // A caller that gives up on its stream after this read.
                if cancels & (1 << ((index + position) % 8)) != 0, index < 8 { entry.stream.batches.cancel() }
            }
            loop.run()
        }
        // The line closes (a close, not a bare channelInactive: NIOHTTP2Handler asserts that it
        // goes inactive once, and the harness's finish() closes the channel too).
        channel.close(promise: nil)
        loop.run()
        for (position, entry) in streams.enumerated() {
            entry.seen.take(entry.stream)
            FuzzCheck.require(entry.seen.ended, "stream \(position) had not ended after the line closed")
        }
    }
}

/// What one exchange has taken from its stream so far.
private final class StreamRecord {
    var parts = 0
    var sawEnd = false
    var sawFinalHead = false
    var ended = false

    func take(_ stream: ClientStream) {
        guard let batch = stream.batches.takeReady() else { return }
        for part in batch.parts {
            FuzzCheck.require(!self.sawEnd, "a response part followed the response's end: \(part)")
            switch part {
            case .head(let head):
                // After the final head, a HEADERS frame is trailers (an end), never a head.
                FuzzCheck.require(!self.sawFinalHead, "a second final response head: \(head.status)")
                self.sawFinalHead = head.status.kind != .informational
            case .body:
                FuzzCheck.require(self.parts > 0, "a body part came before any response head")
            case .end:
                FuzzCheck.require(self.parts > 0, "a response's end came before any head")
                self.sawEnd = true
            }
            self.parts += 1
        }
        if batch.ending != nil { self.ended = true }
    }
}
