import AccessoryTransport
import NIOCore
import Testing

@testable import AccessorySession

/// DATA frames are laid out whole in buffers of the session's pool, which are written into
/// again once the channel has let them go (DataFrameEncoder says why).
@Suite("DATA frames in reused buffers")
struct FrameBufferTests {
    private static func address(_ buffer: ByteBuffer) -> UnsafeRawPointer? {
        buffer.withUnsafeReadableBytes { UnsafeRawPointer($0.baseAddress) }
    }

    private static let encoder = DataFrameEncoder(nonce: 0x1234, maxPayload: SessionFrame.maxPayload)

    /// The frames in `buffers`, read back with the reader the host uses (every CRC checked).
    private static func frames(in buffers: [ByteBuffer]) -> [SessionFrame] {
        var reader = SessionFrameReader()
        for buffer in buffers { reader.append(buffer) }
        var frames: [SessionFrame] = []
        while case .frame(let frame) = reader.next() { frames.append(frame) }
        #expect(reader.bufferedBytes == 0, "every byte belongs to a valid frame")
        return frames
    }

    /// The frames' payloads, one after another.
    private static func joinedPayloads(_ frames: [SessionFrame]) -> ByteBuffer {
        var joined = ByteBuffer()
        for frame in frames { joined.writeImmutableBuffer(frame.payload) }
        return joined
    }

    @Test("a 64 KiB write is one buffer of five frames; a 1 MiB write, buffers of eight frames at most")
    func framesPerBuffer() {
        var pool = DataFrameEncoder.makePool()
        var sequence: UInt32 = 1
        let block = ByteBuffer(repeating: 0xA5, count: 65_536)
        let one = Self.encoder.encode(block, sequence: &sequence, pool: &pool)
        #expect(one.count == 1)
        #expect(one.first?.readableBytes == 65_536 + 5 * SessionFrame.overhead)
        #expect(Self.frames(in: one).map(\.sequence) == [1, 2, 3, 4, 5])

        let large = ByteBuffer(bytes: (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        let buffers = Self.encoder.encode(large, sequence: &sequence, pool: &pool)
        let frameCount = (large.readableBytes + SessionFrame.maxPayload - 1) / SessionFrame.maxPayload
        #expect(buffers.count == (frameCount + 7) / 8)
        #expect(buffers.allSatisfy { $0.readableBytes <= DataFrameEncoder.bufferSize })
        let frames = Self.frames(in: buffers)
        #expect(frames.map(\.sequence) == (0..<frameCount).map { 6 + UInt32($0) })
        #expect(Self.joinedPayloads(frames) == large)
    }

    @Test("a device's small frames fill a buffer as far as they fit")
    func smallFramesPerBuffer() {
        var pool = DataFrameEncoder.makePool()
        var sequence: UInt32 = 0
        let encoder = DataFrameEncoder(nonce: 7, maxPayload: 512 - SessionFrame.overhead)
        let write = ByteBuffer(bytes: (0..<65_536).map { UInt8(truncatingIfNeeded: $0 &* 3) })
        let buffers = encoder.encode(write, sequence: &sequence, pool: &pool)
        let frameCount = (65_536 + 479) / 480
        #expect(buffers.count == 1, "\(frameCount) frames of 512 bytes fit in one buffer")
        let frames = Self.frames(in: buffers)
        #expect(frames.count == frameCount)
        #expect(frames.allSatisfy { $0.payload.readableBytes <= 480 })
        #expect(Self.joinedPayloads(frames) == write)
    }

    @Test("a buffer the channel let go is written into again; one still held is not touched")
    func reuseOnlyOnceLetGo() {
        var pool = DataFrameEncoder.makePool()
        var sequence: UInt32 = 1
        let first = ByteBuffer(repeating: 1, count: 40_000)
        let second = ByteBuffer(repeating: 2, count: 40_000)

        var held = Self.encoder.encode(first, sequence: &sequence, pool: &pool)
        let heldBytes = Array(held[0].readableBytesView)
        let heldAddress = Self.address(held[0])
        // Still held (as by NIO's write queue): the next write gets another buffer, and the
        // held one keeps its frames.
        let next = Self.encoder.encode(second, sequence: &sequence, pool: &pool)
        #expect(Self.address(next[0]) != heldAddress)
        #expect(Array(held[0].readableBytesView) == heldBytes)
        #expect(Self.frames(in: next).map(\.sequence) == [4, 5, 6])

        // Let go (written): the oldest buffer that is free again is reused.
        held.removeAll()
        let again = Self.encoder.encode(second, sequence: &sequence, pool: &pool)
        #expect(Self.address(again[0]) == heldAddress)
        #expect(Self.frames(in: again).map(\.sequence) == [7, 8, 9])
    }

    @Test("writes smaller than a frame get buffers of their own size, and release forgets the pool")
    func smallWritesAndRelease() {
        var pool = DataFrameEncoder.makePool()
        var sequence: UInt32 = 1
        let small = Self.encoder.encode(ByteBuffer(string: "GET /status"), sequence: &sequence, pool: &pool)
        #expect(small.count == 1 && small[0].capacity < SessionFrame.maxFrameSize)

        // The pool keeps a reference to what it lent (to reuse it later) until it is released.
        var held = Self.encoder.encode(ByteBuffer(repeating: 3, count: 20_000), sequence: &sequence, pool: &pool)
        #expect(held[0].modifyIfUniquelyOwned { _ in } == nil, "the pool still tracks the buffer")
        pool.release()
        #expect(held[0].modifyIfUniquelyOwned { _ in } != nil, "released: the buffer is its holder's alone")
    }
}
