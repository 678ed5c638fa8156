import NIOCore

/// Sits on the raw bytes below the HTTP decoder and keeps the link honest:
/// - while no response is due, any byte from the device means the link is out of step (a
///   misbehaving device, or the tail of a response that was not framed as it claimed), so it is
///   reported instead of being parsed as the start of the next response;
/// - while settling after a reopen, stale bytes are discarded;
/// - while a status line is due, its length is bounded (the decoder bounds the header block);
/// - when a response ends, it tells whether the read that carried its end went on past it
///   (``wentBeyondEnd(of:)``): NIO's parser takes such bytes as the start of the next response
///   and keeps them, where no idle check can see them.
///
/// The link handler switches the mode; both run on the channel's event loop.
final class LinkGuardHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    enum Mode {
        /// No response is due: bytes are stray.
        case idle
        /// Stale input after a reopen: dropped, counted.
        case discard
        /// A status line is due; `seen` bytes of it have passed.
        case startLine(seen: Int)
        /// Inside a response: bytes go to the decoder untouched.
        case passThrough
    }

    /// What the bytes from the device are now. A new response starts with
    /// ``startResponse()``, which also starts its accounting afresh; setting `.startLine` here
    /// keeps the accounting of the response in progress.
    var mode: Mode = .idle

    /// A request went out and its response is due: a status line first, and the accounting of
    /// the last response (bytes passed, the copy of its start) starts again from nothing.
    func startResponse() {
        self.responseStart.clear()
        self.bytesPassed = 0
        self.lastFour = 0
        self.mode = .startLine(seen: 0)
    }

    /// A 1xx head was decoded: another status line is due, within the same response's count.
    /// The read that carried the 1xx was counted and copied whole, and may hold the final
    /// head, its body and bytes beyond; clearing here lost them, so bytes after the final
    /// answer's end went unseen (found by the `response` fuzz target).
    func awaitAnotherHead() {
        self.mode = .startLine(seen: 0)
    }

    /// Bytes passed up to the decoder since the response began, and the last four of them.
    private(set) var bytesPassed = 0
    private var lastFour: UInt32 = 0
    private let maxStartLineLength: Int
    /// A copy of the first bytes of the response in progress (at most `responseStartLimit`), so
    /// a parser error can say what in the head was wrong: NIO's parser reports some framing
    /// errors only as "unknown". A copy, not a reference: holding the read buffer would make
    /// the decoder's next append copy it (copy on write) and keep a large read alive.
    private(set) var responseStart = ByteBuffer()
    static let responseStartLimit = 8 * 1024

    private func capture(_ buffer: ByteBuffer) {
        self.bytesPassed += buffer.readableBytes
        for byte in buffer.readableBytesView.suffix(4) { self.lastFour = self.lastFour << 8 | UInt32(byte) }
        let room = Self.responseStartLimit - self.responseStart.readableBytes
        if room > 0 { self.responseStart.writeBytes(buffer.readableBytesView.prefix(room)) }
    }
    /// Told how many bytes were discarded (tests watch it).
    var onDiscard: ((Int) -> Void)?
    private var context: ChannelHandlerContext?
    private var settling: (watch: SettleWatch, promise: EventLoopPromise<Int>, timer: Scheduled<Void>?)?

    init(maxStartLineLength: Int) {
        self.maxStartLineLength = maxStartLineLength
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = self.unwrapInboundIn(data)
        switch self.mode {
        case .passThrough:
            self.capture(buffer)
            context.fireChannelRead(data)
        case .idle:
            self.mode = .discard
            context.fireErrorCaught(
                HTTPLinkError(
                    .strayBytes,
                    "the device sent \(buffer.readableBytes) byte(s) while no request was outstanding "
                        + "(\(Self.preview(buffer))); the link was out of step and will be reopened"
                )
            )
        case .discard:
            self.onDiscard?(buffer.readableBytes)
            self.settling?.watch.inputDiscarded(byteCount: buffer.readableBytes, now: context.eventLoop.now)
        case .startLine(let seen):
            let lineFeed = buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\n"))
            let length = lineFeed.map { seen + ($0 - buffer.readerIndex) + 1 } ?? seen + buffer.readableBytes
            if length > self.maxStartLineLength {
                self.mode = .discard
                context.fireErrorCaught(
                    HTTPLinkError(
                        .responseTooLarge,
                        "the device's status line is longer than \(self.maxStartLineLength) bytes (\(Self.preview(buffer))); "
                            + "it is probably not speaking HTTP, or the link is out of step"
                    )
                )
                return
            }
            self.mode = lineFeed == nil ? .startLine(seen: length) : .passThrough
            self.capture(buffer)
            context.fireChannelRead(data)
        }
    }

    /// How the end of a response is found on the wire.
    enum ResponseEnd {
        /// After its heads (informational ones included) and this many body bytes.
        case afterBody(length: Int)
        /// At an empty line: the last chunk and trailers of a chunked body.
        case atEmptyLine
    }

    /// Whether the bytes passed up went on past the end of the response that just ended (the
    /// decoder holds them as the start of another one). `false` when it cannot be told: heads
    /// longer than the copy kept of them.
    func wentBeyondEnd(of end: ResponseEnd) -> Bool {
        switch end {
        case .atEmptyLine:
            // A chunked message ends with CRLF CRLF; bytes after it that end the same way would
            // be a whole head, which the decoder hands up (and the idle link refuses).
            return self.lastFour != 0x0D0A_0D0A
        case .afterBody(let length):
            guard let headEnd = Self.finalHeadEnd(in: self.responseStart) else { return false }
            return self.bytesPassed > headEnd + length
        }
    }

    /// Where the final (non-1xx) head ends in `bytes`, or `nil` if it does not end there.
    static func finalHeadEnd(in bytes: ByteBuffer) -> Int? {
        let view = bytes.readableBytesView
        var headStart = view.startIndex
        var index = view.startIndex
        while index + 3 < view.endIndex {
            guard view[index] == 0x0D, view[index + 1] == 0x0A, view[index + 2] == 0x0D, view[index + 3] == 0x0A else {
                index += 1
                continue
            }
            let end = index + 4
            // "HTTP/1.1 1xx": an informational head, another head follows (101 is refused).
            let statusFirst = headStart + 9
            if statusFirst < end, view[statusFirst] == UInt8(ascii: "1") {
                headStart = end
                index = end
                continue
            }
            return end - view.startIndex
        }
        return nil
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.endSettling(.failure(HTTPLinkError(.linkClosed, "the link closed while settling")))
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.endSettling(.failure(HTTPLinkError(.linkClosed, "the link closed while settling")))
        context.fireChannelInactive()
    }

    /// Discards input until the line has been quiet for `quietPeriod` (or `maxDuration` has
    /// passed), then expects nothing (`idle`). Used after reopening a transport that may carry
    /// stale bytes. The future gives how many bytes were discarded.
    func settle(quietPeriod: TimeAmount, maxDuration: TimeAmount, on eventLoop: any EventLoop) -> EventLoopFuture<Int> {
        guard let context = self.context, context.channel.isActive, self.settling == nil else {
            return eventLoop.makeFailedFuture(HTTPLinkError(.linkClosed, "the link closed before settling began"))
        }
        self.mode = .discard
        let watch = SettleWatch(quietPeriod: quietPeriod, maxDuration: maxDuration, now: context.eventLoop.now)
        self.settling = (watch, context.eventLoop.makePromise(), nil)
        self.lookAtSettling()
        return self.settling?.promise.futureResult ?? context.eventLoop.makeSucceededFuture(0)
    }

    private func lookAtSettling() {
        guard let settling = self.settling, let context = self.context else { return }
        switch settling.watch.look(now: context.eventLoop.now) {
        case .settled(let discarded):
            self.mode = .idle
            self.endSettling(.success(discarded))
        case .lookAgainAt(let deadline):
            self.settling?.timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
                self.lookAtSettling()
            }
        }
    }

    private func endSettling(_ result: Result<Int, HTTPLinkError>) {
        guard let settling = self.settling else { return }
        self.settling = nil
        settling.timer?.cancel()
        settling.promise.completeWith(result.mapError { $0 as any Error })
    }

    /// A short printable rendering of the first bytes, for error messages.
    static func preview(_ buffer: ByteBuffer, limit: Int = 24) -> String {
        var text = ""
        for byte in buffer.readableBytesView.prefix(limit) {
            switch byte {
            case 0x20..<0x7F where byte != UInt8(ascii: "\\"): text.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "\r"): text += "\\r"
            case UInt8(ascii: "\n"): text += "\\n"
            default: text += "\\x" + String(byte, radix: 16, uppercase: false).leftPadded(to: 2)
            }
        }
        return "starting \"\(text)\"" + (buffer.readableBytes > limit ? "…" : "")
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        self.count >= width ? self : String(repeating: "0", count: width - self.count) + self
    }
}
