import NIOCore

extension EmulatedAccessory {
    /// The size of the blocks `/bytes/N` and `/stream/N` are generated and sent in.
    static let patternBlockSize = 64 * 1024

    /// The byte at `offset` of every `/bytes/N` and `/stream/N` body:
    /// `UInt8(truncatingIfNeeded: offset &* 31 &+ (offset >> 16) &* 101 &+ 7)`.
    ///
    /// The `offset >> 16` term makes each 64 KiB block differ, so a client that repeats, drops
    /// or reorders a block gets a different hash.
    @inlinable
    public static func patternByte(at offset: Int) -> UInt8 {
        UInt8(truncatingIfNeeded: offset &* 31 &+ (offset >> 16) &* 101 &+ 7)
    }

    /// `count` bytes of the pattern starting at `offset` (see ``patternByte(at:)``), for tests
    /// to compare against or hash.
    public static func patternBytes(offset: Int, count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: max(0, count))
        bytes.withUnsafeMutableBytes { Self.fillPattern($0, offset: offset) }
        return bytes
    }

    /// The pattern as a buffer ready to send.
    static func patternBuffer(offset: Int, count: Int, allocator: ByteBufferAllocator = ByteBufferAllocator())
        -> ByteBuffer
    {
        var buffer = allocator.buffer(capacity: count)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { destination in
            Self.fillPattern(UnsafeMutableRawBufferPointer(rebasing: destination[0..<count]), offset: offset)
            return count
        }
        return buffer
    }

    /// `offset &* 31 &+ 7` repeats every 256 bytes, so it is precomputed for one block; each
    /// block then only adds its own constant.
    private static let blockBase: [UInt8] = (0..<patternBlockSize).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }

    private static func fillPattern(_ destination: UnsafeMutableRawBufferPointer, offset: Int) {
        Self.blockBase.withUnsafeBufferPointer { base in
            var written = 0
            while written < destination.count {
                let position = offset + written
                let inBlock = position & (patternBlockSize - 1)
                let run = min(destination.count - written, patternBlockSize - inBlock)
                let delta = UInt8(truncatingIfNeeded: (position >> 16) &* 101)
                for index in 0..<run {
                    destination[written + index] = base[inBlock + index] &+ delta
                }
                written += run
            }
        }
    }
}
