import AccessorySession
import NIOCore
import Testing

/// The watch a responder keeps over a plain link for a HELLO (docs/framing.md §6).
struct HelloWatchTests {
    static func hello(_ nonce: UInt64) -> ByteBuffer {
        var buffer = ByteBuffer()
        SessionFrame(
            .hello,
            nonce: nonce,
            sequence: 0,
            payload: SessionFrame.handshakePayload(version: 1, maxFrame: 16384)
        )
        .encode(into: &buffer)
        return buffer
    }

    static func plainBytes(_ segments: [HelloWatch.Segment]) -> [UInt8] {
        segments.flatMap { segment -> [UInt8] in
            if case .plain(let bytes) = segment { return Array(bytes.readableBytesView) }
            return []
        }
    }

    /// Plain bytes with the magic's first byte here and there (none starts a frame) come out
    /// whole and in order, also from a buffer read from the middle (a slice whose reader index
    /// is not 0).
    @Test(arguments: [0, 1, 7, 4095])
    func plainBytesPassThrough(skip: Int) {
        var bytes = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        for position in stride(from: 5, to: bytes.count, by: 997) { bytes[position] = 0xAC }
        bytes[bytes.count - 1] = 0x00
        var buffer = ByteBuffer(bytes: bytes)
        buffer.moveReaderIndex(forwardBy: skip)
        var watch = HelloWatch()
        let (segments, rest) = watch.feed(buffer)
        #expect(rest == nil)
        #expect(watch.heldBytes == 0)
        #expect(Self.plainBytes(segments) == Array(bytes[skip...]))
    }

    /// A HELLO in the middle of plain bytes: what came before is plain, the HELLO is taken off,
    /// and what follows it is the session's.
    @Test func aHelloInTheMiddleIsFound() {
        var input = ByteBuffer(bytes: [1, 2, 0xAC, 3])
        input.writeImmutableBuffer(Self.hello(7))
        input.writeBytes([9, 8, 7])
        var watch = HelloWatch()
        let (segments, rest) = watch.feed(input)
        #expect(Self.plainBytes(segments) == [1, 2, 0xAC, 3])
        guard case .hello(let frame) = segments.last else {
            Issue.record("no HELLO in \(segments)")
            return
        }
        #expect(frame.nonce == 7)
        #expect(rest.map { Array($0.readableBytesView) } == [9, 8, 7])
    }

    /// A HELLO split across reads is held back until it is whole.
    @Test func aHelloSplitAcrossReadsIsHeldBack() {
        let hello = Self.hello(9)
        var watch = HelloWatch()
        var first = ByteBuffer(bytes: [5, 5])
        first.writeImmutableBuffer(hello.getSlice(at: 0, length: 10) ?? ByteBuffer())
        let (segments, rest) = watch.feed(first)
        #expect(Self.plainBytes(segments) == [5, 5] && rest == nil && watch.heldBytes == 10)
        let (more, _) = watch.feed(hello.getSlice(at: 10, length: hello.readableBytes - 10) ?? ByteBuffer())
        guard case .hello(let frame) = more.last else {
            Issue.record("no HELLO in \(more)")
            return
        }
        #expect(frame.nonce == 9)
    }
}
