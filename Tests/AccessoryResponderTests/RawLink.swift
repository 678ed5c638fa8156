import Foundation
import NIOCore
import NIOPosix

/// A deliberately dumb HTTP/1.1 client for checking exact wire behaviour: it writes the bytes it
/// is given and parses what comes back by hand, on the other end of a real socketpair.
///
/// Every read is bounded by a watchdog that closes the link after `timeout`, so a responder bug
/// fails the test instead of hanging it.
final class RawLink {
    typealias Channel = NIOAsyncChannel<ByteBuffer, ByteBuffer>

    private let channel: any NIOCore.Channel
    private let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    private var iterator: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator
    private var buffer = ByteBuffer()
    private let watchdog: Scheduled<Void>

    /// Attaches an async channel to the client's end of the socketpair.
    static func connect(descriptor: CInt, on eventLoop: any EventLoop) async throws -> Channel {
        try await NIOPipeBootstrap(group: eventLoop)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .takingOwnershipOfDescriptor(inputOutput: descriptor) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try Channel(wrappingChannelSynchronously: channel)
                }
            }
    }

    /// Wraps the scoped inbound and outbound halves (from `executeThenClose`).
    init(
        channel: any NIOCore.Channel,
        inbound: NIOAsyncChannelInboundStream<ByteBuffer>,
        outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>,
        timeout: TimeAmount = .seconds(30)
    ) {
        self.channel = channel
        self.outbound = outbound
        self.iterator = inbound.makeAsyncIterator()
        self.watchdog = channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
    }

    func send(_ text: String) async throws {
        try await self.outbound.write(ByteBuffer(string: text))
    }

    func send(bytes: [UInt8]) async throws {
        try await self.outbound.write(ByteBuffer(bytes: bytes))
    }

    /// Whether the client's end is still open (a write into a link the device closed fails, and
    /// closes it).
    var isOpen: Bool { self.channel.isActive }

    func cancelWatchdog() {
        self.watchdog.cancel()
    }

    /// Reads one response. `bodyExpected: false` is for responses to HEAD.
    func readResponse(bodyExpected: Bool = true) async throws -> RawResponse {
        let headBytes = try await self.readUntil(delimiter: Array("\r\n\r\n".utf8))
        let lines = String(decoding: headBytes, as: UTF8.self).components(separatedBy: "\r\n").filter { !$0.isEmpty }
        guard let statusLine = lines.first, statusLine.hasPrefix("HTTP/1.1 ") else {
            throw RawLinkError("bad status line: \(lines.first ?? "<none>")")
        }
        let statusParts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else {
            throw RawLinkError("bad status line: \(statusLine)")
        }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { throw RawLinkError("bad header line: \(line)") }
            headers.append((String(line[..<colon]), String(line[line.index(after: colon)...]).trimmingSpaces()))
        }
        var response = RawResponse(
            status: status,
            reason: statusParts.count > 2 ? String(statusParts[2]) : "",
            headers: headers,
            body: [],
            chunkCount: 0
        )
        let bodyless = !bodyExpected || (100..<200).contains(status) || status == 204 || status == 304
        if bodyless { return response }
        if response.header("transfer-encoding")?.lowercased() == "chunked" {
            while true {
                let sizeLine = String(decoding: try await self.readUntil(delimiter: [13, 10]), as: UTF8.self)
                let sizeText = sizeLine.split(separator: ";").first.map(String.init) ?? ""
                guard let size = Int(sizeText.trimmingSpaces(), radix: 16) else {
                    throw RawLinkError("bad chunk size line: \(sizeLine)")
                }
                if size == 0 {
                    // Trailers, then the empty line.
                    while try await self.readUntil(delimiter: [13, 10]).count > 0 {}
                    break
                }
                response.body += try await self.readExactly(size)
                guard try await self.readExactly(2) == [13, 10] else {
                    throw RawLinkError("chunk not followed by CRLF")
                }
                response.chunkCount += 1
            }
        } else if let lengthText = response.header("content-length") {
            guard let length = Int(lengthText) else { throw RawLinkError("bad content-length \(lengthText)") }
            response.body = try await self.readExactly(length)
        } else {
            response.body = try await self.readToEnd()
        }
        return response
    }

    /// Reads until the peer closes; returns whatever came before the close.
    func readToEnd() async throws -> [UInt8] {
        while try await self.fill() {}
        let rest = self.buffer.readBytes(length: self.buffer.readableBytes) ?? []
        return rest
    }

    /// Whether the peer closes the link without sending anything more.
    func peerClosesWithoutData() async throws -> Bool {
        try await self.readToEnd().isEmpty
    }

    // MARK: Buffering

    /// Reads more bytes; `false` at end of stream.
    private func fill() async throws -> Bool {
        guard var more = try await self.iterator.next() else { return false }
        self.buffer.writeBuffer(&more)
        return true
    }

    private func readUntil(delimiter: [UInt8]) async throws -> [UInt8] {
        var searchFrom = 0
        while true {
            let view = self.buffer.readableBytesView
            if view.count >= delimiter.count {
                // Heads and chunk-size lines are short: never copy more than their worth.
                let bytes = Array(view.prefix(128 * 1024))
                var index = searchFrom
                while index + delimiter.count <= bytes.count {
                    if bytes[index] == delimiter[0] && Array(bytes[index..<(index + delimiter.count)]) == delimiter {
                        let line = Array(bytes[0..<index])
                        self.buffer.moveReaderIndex(forwardBy: index + delimiter.count)
                        return line
                    }
                    index += 1
                }
                searchFrom = max(0, bytes.count - delimiter.count + 1)
            }
            guard try await self.fill() else {
                throw RawLinkError(
                    "link closed while waiting for \(delimiter.count == 2 ? "a line" : "a response head")"
                )
            }
        }
    }

    private func readExactly(_ count: Int) async throws -> [UInt8] {
        while self.buffer.readableBytes < count {
            guard try await self.fill() else {
                throw RawLinkError("link closed after \(self.buffer.readableBytes) of \(count) body bytes")
            }
        }
        return self.buffer.readBytes(length: count) ?? []
    }
}

extension String {
    func trimmingSpaces() -> String {
        var result = Substring(self)
        while let first = result.first, first == " " || first == "\t" { result.removeFirst() }
        while let last = result.last, last == " " || last == "\t" { result.removeLast() }
        return String(result)
    }
}
