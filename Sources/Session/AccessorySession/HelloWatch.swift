import NIOCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Watches a plain byte stream for a valid HELLO (docs/framing.md §6): bytes that cannot start
/// a frame pass straight through; a candidate (from a byte `AC` on) is held back until it is a
/// valid frame or cannot be one. A valid HELLO starts a session; any other valid frame (a
/// PING or CLOSE of a session that just ended, crossing the responder's CLOSE) is dropped.
/// I/O-free; ``release()`` gives up on a candidate that stopped growing.
public struct HelloWatch: Sendable {
    /// What the watched bytes turned out to be, in order.
    public enum Segment: Sendable {
        /// Bytes that are not a frame: plain input for the HTTP layer.
        case plain(ByteBuffer)
        /// A valid HELLO, taken off the input: a session starts.
        case hello(SessionFrame)
    }

    private var held = ByteBuffer()

    /// A watch with nothing held back.
    public init() {}

    /// Bytes held back as a possible HELLO.
    public var heldBytes: Int { self.held.readableBytes }

    /// Feeds `bytes`; returns the plain bytes and HELLOs found, up to the first HELLO. Bytes after
    /// a HELLO are returned in `rest` (they belong to the session it starts).
    public mutating func feed(_ bytes: ByteBuffer) -> (segments: [Segment], rest: ByteBuffer?) {
        var input: ByteBuffer
        if self.held.readableBytes > 0 {
            input = self.held
            var bytes = bytes
            input.writeBuffer(&bytes)
            self.held = ByteBuffer()
        } else {
            input = bytes
        }
        var segments: [Segment] = []
        var plainStart = input.readerIndex
        var searchFrom = input.readerIndex
        while let candidate = Self.firstMagicByte(in: input, from: searchFrom) {
            switch SessionFrameReader.check(input, at: candidate, maxFrameSize: SessionFrame.maxFrameSize) {
            case .needMoreBytes:
                if candidate > plainStart, let plain = input.getSlice(at: plainStart, length: candidate - plainStart) {
                    segments.append(.plain(plain))
                }
                self.held = input.getSlice(at: candidate, length: input.writerIndex - candidate) ?? ByteBuffer()
                return (segments, nil)
            case .valid(let length)
            where input.getInteger(at: candidate + 5, as: UInt8.self) == SessionFrame.Kind.hello.rawValue:
                if candidate > plainStart, let plain = input.getSlice(at: plainStart, length: candidate - plainStart) {
                    segments.append(.plain(plain))
                }
                input.moveReaderIndex(to: candidate)
                segments.append(.hello(SessionFrameReader.take(&input, payloadLength: length)))
                return (segments, input.readableBytes > 0 ? input : nil)
            case .valid(let length):
                if candidate > plainStart, let plain = input.getSlice(at: plainStart, length: candidate - plainStart) {
                    segments.append(.plain(plain))
                }
                plainStart = candidate + SessionFrame.overhead + length
                searchFrom = plainStart
            case .invalid:
                searchFrom = candidate + 1
            }
        }
        if input.writerIndex > plainStart,
            let plain = input.getSlice(at: plainStart, length: input.writerIndex - plainStart)
        {
            segments.append(.plain(plain))
        }
        return (segments, nil)
    }

    /// The index of the first byte from `index` on that can start a frame. `memchr`: every byte
    /// a plain link carries is looked at here, and a byte at a time through the buffer's view
    /// cost the responder more than the rest of an upload's way through it (4 % of a guest's CPU
    /// during a USB upload, in a profile of 2026-12-06).
    static func firstMagicByte(in buffer: ByteBuffer, from index: Int) -> Int? {
        buffer.withUnsafeReadableBytes { raw -> Int? in
            let offset = index - buffer.readerIndex
            guard offset >= 0, offset < raw.count, let base = raw.baseAddress else { return nil }
            guard let found = memchr(base + offset, CInt(SessionFrame.magic[0]), raw.count - offset) else {
                return nil
            }
            return buffer.readerIndex + (UnsafeRawPointer(found) - base)
        }
    }

    /// The held candidate stopped growing (no byte for a while): it was not a frame after all
    /// (a body that ends in `AC`, say). Its first byte is plain; the rest is watched again.
    public mutating func release() -> (segments: [Segment], rest: ByteBuffer?) {
        guard var held = self.drain() else { return ([], nil) }
        let first = held.readSlice(length: 1) ?? ByteBuffer()
        let (segments, rest) = self.feed(held)
        return ([.plain(first)] + segments, rest)
    }

    /// Gives back the held bytes (the stream ended, or the watch is being left).
    public mutating func drain() -> ByteBuffer? {
        defer { self.held = ByteBuffer() }
        return self.held.readableBytes > 0 ? self.held : nil
    }
}
