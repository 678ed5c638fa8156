import AccessoryHTTP1
import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTPTypes
import Testing

@testable import AccessoryHTTP2

/// The body parts of a read, gathered for an exchange on another executor: in order, into
/// buffers of the connection's pool, so that the read's storage (swift-nio-http2's decoder
/// buffer) is ours alone again when the next read is appended to it (BodyBufferPool says why).
@Suite("HTTP/2 response bodies gathered at a read's end")
struct BodyGatherTests {
    /// One read's bytes, and slices of it as the decoder hands out DATA payloads.
    private static func read(_ count: Int) -> ByteBuffer {
        ByteBuffer(bytes: (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7) })
    }

    private static func bytes(_ parts: [HTTPResponsePart]) -> [UInt8] {
        parts.flatMap { part -> [UInt8] in
            if case .body(let buffer) = part { Array(buffer.readableBytesView) } else { [] }
        }
    }

    private static func address(_ buffer: ByteBuffer) -> UnsafeRawPointer? {
        buffer.withUnsafeReadableBytes { UnsafeRawPointer($0.baseAddress) }
    }

    @Test func aRunOfBodyPartsBecomesOneBufferInOrderAndTheReadIsReleased() throws {
        let batches = ResponseBatches(eventLoop: EmbeddedEventLoop(), idleTimeout: .seconds(1), deadline: nil)
        batches.gathersBody = true
        var pool = BodyBufferPool()
        var read = Self.read(100_000)
        let expected = Array(read.readableBytesView)
        do {
            var slicing = read
            batches.append(.head(HTTPResponse(status: .ok)))
            while let slice = slicing.readSlice(length: min(16_393, slicing.readableBytes)), slice.readableBytes > 0 {
                batches.append(.body(slice))
            }
            batches.append(.end(nil))
        }
        #expect(read.modifyIfUniquelyOwned { _ in } == nil, "the slices share the read's storage")
        batches.gatherBody(using: &pool)
        #expect(read.modifyIfUniquelyOwned { _ in } != nil, "after the gather the read's storage is unshared")
        let batch = try #require(batches.takeReady())
        #expect(batch.parts.count == 3)
        guard batch.parts.count == 3, case .head = batch.parts[0], case .end = batch.parts[2] else {
            Issue.record("the parts are not head, body, end: \(batch.parts)")
            return
        }
        #expect(Self.bytes(batch.parts) == expected)
    }

    @Test func bodyPartsOfAnExchangeOnTheLoopAreLeftAsTheyCame() throws {
        let batches = ResponseBatches(eventLoop: EmbeddedEventLoop(), idleTimeout: .seconds(1), deadline: nil)
        var pool = BodyBufferPool()
        let read = Self.read(40_000)
        batches.append(.body(read.getSlice(at: 0, length: 20_000) ?? ByteBuffer()))
        batches.append(.body(read.getSlice(at: 20_000, length: 20_000) ?? ByteBuffer()))
        batches.gatherBody(using: &pool)
        let batch = try #require(batches.takeReady())
        #expect(batch.parts.count == 2)
        #expect(Self.bytes(batch.parts) == Array(read.readableBytesView))
    }

    /// Parts gathered at two reads' ends stay apart: the second read's run is its own buffer.
    @Test func eachReadIsGatheredOnce() throws {
        let batches = ResponseBatches(eventLoop: EmbeddedEventLoop(), idleTimeout: .seconds(1), deadline: nil)
        batches.gathersBody = true
        var pool = BodyBufferPool()
        let first = Self.read(30_000), second = Self.read(50_000)
        batches.append(.body(first))
        batches.gatherBody(using: &pool)
        batches.append(.body(second))
        batches.gatherBody(using: &pool)
        let batch = try #require(batches.takeReady())
        #expect(batch.parts.count == 2)
        #expect(Self.bytes(batch.parts) == Array(first.readableBytesView) + Array(second.readableBytesView))
    }

    @Test func aPooledBufferIsReusedOnceItsHolderLetsGo() {
        var pool = BodyBufferPool()
        let payload = Self.read(64 << 10)
        var held: ByteBuffer? = pool.gather([payload], totalBytes: payload.readableBytes)
        let firstAddress = held.flatMap(Self.address)
        // Still held: the next gather gets another buffer.
        let second = pool.gather([payload], totalBytes: payload.readableBytes)
        #expect(Self.address(second) != firstAddress)
        #expect(Array(second.readableBytesView) == Array(payload.readableBytesView))
        // Let go: the next gather reuses its storage, emptied first.
        held = nil
        let third = pool.gather([payload.getSlice(at: 0, length: 20_000) ?? ByteBuffer()], totalBytes: 20_000)
        #expect(Self.address(third) == firstAddress)
        #expect(Array(third.readableBytesView) == Array(payload.readableBytesView.prefix(20_000)))
        _ = held
    }

    @Test func smallBodiesGetBuffersOfTheirOwnSizeAndReleaseForgetsThePool() {
        var pool = BodyBufferPool()
        let small = pool.gather([ByteBuffer(string: "ok")], totalBytes: 2)
        #expect(String(buffer: small) == "ok")
        #expect(small.capacity < BodyBufferPool.smallestPooled)
        // A pooled one is shared with the pool until the pool forgets it.
        let payload = Self.read(64 << 10)
        var held = pool.gather([payload], totalBytes: payload.readableBytes)
        #expect(held.modifyIfUniquelyOwned { _ in } == nil, "the pool keeps a reference to reuse it")
        pool.release()
        #expect(held.modifyIfUniquelyOwned { _ in } != nil, "released: the pool holds nothing")
        #expect(Array(held.readableBytesView) == Array(payload.readableBytesView))
    }
}
