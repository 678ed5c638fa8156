import AccessoryTransport
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
    /// How many lent buffers are tracked (2 MiB of them, the connection's receive window);
    /// older ones are left to their exchanges.
    static let lentLimit = 8
    /// The size of a pooled buffer: a 256 KiB read's payloads of one stream fit.
    static let pooledCapacity = 256 << 10
    /// Payloads of a read smaller than this get a buffer of their own size, not pooled.
    static let smallestPooled = 16 << 10
    private var buffers = ReusableBufferPool(
        lentLimit: Self.lentLimit,
        pooledCapacity: Self.pooledCapacity,
        smallestPooled: Self.smallestPooled
    )

    /// `parts` (of `totalBytes` together) gathered into one buffer, of the pool when large.
    mutating func gather(_ parts: some Sequence<ByteBuffer>, totalBytes: Int) -> ByteBuffer {
        self.buffers.lend(capacity: totalBytes) { buffer in
            for part in parts { buffer.writeImmutableBuffer(part) }
        }
    }

    /// Forgets the lent buffers (the connection has no stream left): memory is not kept for a
    /// download that may never come.
    mutating func release() {
        self.buffers.release()
    }
}
