import NIOCore

/// Buffers a connection gathers response body bytes into, reused once their exchanges let them
/// go, on the connection's event loop.
///
/// Why gather at all: swift-nio-http2's frame decoder appends each read to its own buffer, and
/// while DATA payloads it handed out still share that buffer's storage, the append copies the
/// storage whole into a fresh allocation (copy on write, page faults and all) before adding the
/// read. An exchange on another executor holds its payloads across reads, so every read paid
/// that. Copying a read's payloads into a buffer of our own at the end of the read releases the
/// decoder's storage, whose next append is then a plain copy into warm memory; reusing our
/// buffers keeps the gather copy warm too. `loop --http 2 --caller pool --path
/// /bytes/268435456`: see docs/performance.md.
struct BodyBufferPool {
    /// Buffers handed out, oldest first; one whose exchange let it go is ours alone again.
    private var lent: CircularBuffer<ByteBuffer> = []
    /// How many lent buffers are tracked (2 MiB of them, the connection's receive window);
    /// older ones are left to their exchanges.
    static let lentLimit = 8
    /// The size of a pooled buffer: a 256 KiB read's payloads of one stream fit.
    static let pooledCapacity = 256 << 10
    /// Payloads of a read smaller than this get a buffer of their own size, not pooled.
    static let smallestPooled = 16 << 10
    private let allocator = ByteBufferAllocator()

    /// `parts` (of `totalBytes` together) gathered into one buffer, of the pool when large.
    mutating func gather(_ parts: some Sequence<ByteBuffer>, totalBytes: Int) -> ByteBuffer {
        guard totalBytes >= Self.smallestPooled, totalBytes <= Self.pooledCapacity else {
            var buffer = self.allocator.buffer(capacity: totalBytes)
            for part in parts { buffer.writeImmutableBuffer(part) }
            return buffer
        }
        var buffer = self.takeReusable() ?? self.allocator.buffer(capacity: Self.pooledCapacity)
        for part in parts { buffer.writeImmutableBuffer(part) }
        if self.lent.count >= Self.lentLimit { self.lent.removeFirst() }
        self.lent.append(buffer)
        return buffer
    }

    /// Forgets the lent buffers (the connection has no stream left): memory is not kept for a
    /// download that may never come.
    mutating func release() {
        self.lent.removeAll()
    }

    /// The oldest lent buffer that is ours alone again, emptied.
    private mutating func takeReusable() -> ByteBuffer? {
        for _ in 0..<self.lent.count {
            var candidate = self.lent.removeFirst()
            if candidate.modifyIfUniquelyOwned({ $0.clear() }) != nil { return candidate }
            self.lent.append(candidate)
        }
        return nil
    }
}
