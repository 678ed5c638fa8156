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

    /// The pattern as a buffer ready to send. A range inside one 64 KiB block (as the endpoints
    /// send) is a slice of ``patternSource``: no allocation, no copy.
    static func patternBuffer(offset: Int, count: Int, allocator: ByteBufferAllocator = ByteBufferAllocator())
        -> ByteBuffer
    {
        let window = Self.patternWindow(at: offset)
        if count <= window.run, let slice = Self.patternSource.getSlice(at: window.start, length: max(0, count)) {
            return slice
        }
        var buffer = allocator.buffer(capacity: count)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { destination in
            Self.fillPattern(UnsafeMutableRawBufferPointer(rebasing: destination[0..<count]), offset: offset)
            return count
        }
        return buffer
    }

    /// Within one 64 KiB block the pattern is `offset &* 31 &+ 7` plus the block's constant
    /// `d = (offset >> 16) &* 101`. As 31 is invertible mod 256 (31 · 223 ≡ 1), adding `d` is the
    /// same as starting `d · 223` bytes further into `index &* 31 &+ 7`: every block is a
    /// window of this one source of 64 KiB + 256 bytes.
    static let patternSource: ByteBuffer = {
        var buffer = ByteBuffer()
        buffer.writeBytes((0..<(patternBlockSize + 256)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        return buffer
    }()

    /// Where the pattern at `position` starts in ``patternSource``, and how many bytes remain
    /// in its 64 KiB block.
    private static func patternWindow(at position: Int) -> (start: Int, run: Int) {
        let inBlock = position & (patternBlockSize - 1)
        let shift = ((position >> 16) &* 101 &* 223) & 255
        return (inBlock + shift, patternBlockSize - inBlock)
    }

    private static func fillPattern(_ destination: UnsafeMutableRawBufferPointer, offset: Int) {
        Self.patternSource.withUnsafeReadableBytes { source in
            var written = 0
            while written < destination.count {
                let window = Self.patternWindow(at: offset + written)
                let size = min(window.run, destination.count - written)
                UnsafeMutableRawBufferPointer(rebasing: destination[written..<(written + size)]).copyMemory(
                    from: UnsafeRawBufferPointer(rebasing: source[window.start..<(window.start + size)])
                )
                written += size
            }
        }
    }
}
