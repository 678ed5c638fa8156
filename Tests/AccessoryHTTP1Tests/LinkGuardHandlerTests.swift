import NIOCore
import NIOEmbedded
import Testing

@testable import AccessoryHTTP1

@Suite struct LinkGuardHandlerTests {
    func make(limit: Int = 32) throws -> (EmbeddedChannel, LinkGuardHandler) {
        let guardHandler = LinkGuardHandler(maxStartLineLength: limit)
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(guardHandler)
        return (channel, guardHandler)
    }

    func caughtCode(_ channel: EmbeddedChannel) -> HTTPLinkError.Code? {
        do {
            try channel.throwIfErrorCaught()
            return nil
        } catch let error as HTTPLinkError {
            return error.code
        } catch {
            return nil
        }
    }

    /// `writeInbound` rethrows the error the write made the pipeline catch.
    func codeOfWrite(_ channel: EmbeddedChannel, _ buffer: ByteBuffer) -> HTTPLinkError.Code? {
        do {
            try channel.writeInbound(buffer)
            return nil
        } catch let error as HTTPLinkError {
            return error.code
        } catch {
            Issue.record("unexpected error \(error)")
            return nil
        }
    }

    @Test func idleBytesAreStray() throws {
        let (channel, guardHandler) = try make()
        #expect(codeOfWrite(channel, ByteBuffer(string: "HTTP/1.1 200 OK\r\n")) == .strayBytes)
        #expect(try channel.readInbound(as: ByteBuffer.self) == nil)
        // Later bytes are discarded silently.
        var discarded = 0
        guardHandler.onDiscard = { discarded += $0 }
        try channel.writeInbound(ByteBuffer(string: "more"))
        #expect(caughtCode(channel) == nil)
        #expect(try channel.readInbound(as: ByteBuffer.self) == nil)
        #expect(discarded == 4)
        _ = try channel.finish()
    }

    @Test func startLineWithinLimitPasses() throws {
        let (channel, guardHandler) = try make(limit: 32)
        guardHandler.startResponse()
        try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 200"))
        #expect(try channel.readInbound(as: ByteBuffer.self) == ByteBuffer(string: "HTTP/1.1 200"))
        guard case .startLine(let seen) = guardHandler.mode else {
            Issue.record("expected startLine, got \(guardHandler.mode)")
            return
        }
        #expect(seen == 12)
        try channel.writeInbound(ByteBuffer(string: " OK\r\nContent-Length: 0\r\n\r\n"))
        #expect(try channel.readInbound(as: ByteBuffer.self) == ByteBuffer(string: " OK\r\nContent-Length: 0\r\n\r\n"))
        guard case .passThrough = guardHandler.mode else {
            Issue.record("expected passThrough, got \(guardHandler.mode)")
            return
        }
        #expect(caughtCode(channel) == nil)
        _ = try channel.finish()
    }

    @Test func startLineExactlyAtLimitPasses() throws {
        let (channel, guardHandler) = try make(limit: 17)
        guardHandler.startResponse()
        try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\n"))  // 17 bytes
        #expect(caughtCode(channel) == nil)
        #expect(try channel.readInbound(as: ByteBuffer.self) != nil)
        _ = try channel.finish()
    }

    @Test func overlongStartLineIsRefused() throws {
        let (channel, guardHandler) = try make(limit: 16)
        guardHandler.startResponse()
        try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 200 "))
        #expect(caughtCode(channel) == nil)
        _ = try channel.readInbound(as: ByteBuffer.self)
        #expect(codeOfWrite(channel, ByteBuffer(string: "Very Long Reason\r\n")) == .responseTooLarge)
        #expect(try channel.readInbound(as: ByteBuffer.self) == nil)
        _ = try channel.finish()
    }

    @Test func overlongStartLineWithoutLineFeedIsRefused() throws {
        let (channel, guardHandler) = try make(limit: 16)
        guardHandler.startResponse()
        #expect(codeOfWrite(channel, ByteBuffer(repeating: UInt8(ascii: "x"), count: 17)) == .responseTooLarge)
        _ = try channel.finish()
    }

    @Test func startLineCountsFromReaderIndex() throws {
        let (channel, guardHandler) = try make(limit: 17)
        guardHandler.startResponse()
        var buffer = ByteBuffer(string: "0123456789HTTP/1.1 200 OK\r\nrest")
        buffer.moveReaderIndex(forwardBy: 10)
        try channel.writeInbound(buffer)
        #expect(caughtCode(channel) == nil)
        _ = try channel.finish()
    }

    /// A new response's accounting starts from nothing; a 1xx's final head is counted on top
    /// of the 1xx (the read that carried the 1xx may hold the final head and beyond).
    @Test func aNewResponseStartsItsCountButAnotherHeadKeepsIt() throws {
        let (channel, guardHandler) = try make(limit: 64)
        guardHandler.startResponse()
        try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 100 Continue\r\n\r\n"))
        _ = try channel.readInbound(as: ByteBuffer.self)
        #expect(guardHandler.bytesPassed == 25)
        guardHandler.awaitAnotherHead()
        #expect(guardHandler.bytesPassed == 25, "the 1xx's bytes belong to the same response")
        try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\n"))
        _ = try channel.readInbound(as: ByteBuffer.self)
        #expect(guardHandler.bytesPassed == 42)
        #expect(String(buffer: guardHandler.responseStart).hasPrefix("HTTP/1.1 100 Continue"))
        guardHandler.startResponse()
        #expect(guardHandler.bytesPassed == 0)
        #expect(guardHandler.responseStart.readableBytes == 0)
        _ = try channel.finish()
    }

    @Test func passThroughForwardsEverything() throws {
        let (channel, guardHandler) = try make(limit: 4)
        guardHandler.mode = .passThrough
        let big = ByteBuffer(repeating: 0x41, count: 1000)
        try channel.writeInbound(big)
        #expect(try channel.readInbound(as: ByteBuffer.self) == big)
        #expect(caughtCode(channel) == nil)
        _ = try channel.finish()
    }

    @Test func preview() {
        let text = LinkGuardHandler.preview(ByteBuffer(bytes: [0x48, 0x0D, 0x0A, 0x00, 0x5C]))
        #expect(text == "starting \"H\\r\\n\\x00\\x5c\"")
        #expect(LinkGuardHandler.preview(ByteBuffer(repeating: 0x41, count: 30)).hasSuffix("…"))
    }
}
