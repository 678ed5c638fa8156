import NIOCore

/// Buffers lent to the layers above (an exchange, the channel's write queue), reused once they
/// let them go, so that bulk bytes are copied into warm memory instead of a fresh allocation
/// that is then faulted in page by page.
///
/// A lent buffer is ours alone again when no one else holds its storage, which
/// `modifyIfUniquelyOwned` tells without copying. Only the newest ``lentLimit`` are tracked:
/// older ones are left to whoever holds them, and memory stays bounded.
package struct ReusableBufferPool: Sendable {
    /// Buffers handed out, oldest first.
    private var lent: CircularBuffer<ByteBuffer> = []
    /// How many lent buffers are tracked.
    package let lentLimit: Int
    /// The capacity a new pooled buffer gets (at least what was asked for).
    package let pooledCapacity: Int
    /// Asks for less than this get a buffer of their own size, not pooled.
    package let smallestPooled: Int
    private let allocator = ByteBufferAllocator()

    /// A pool lending buffers of `pooledCapacity` bytes for asks from `smallestPooled` up to
    /// `pooledCapacity`, tracking at most `lentLimit` of them.
    package init(lentLimit: Int, pooledCapacity: Int, smallestPooled: Int) {
        self.lentLimit = lentLimit
        self.pooledCapacity = pooledCapacity
        self.smallestPooled = smallestPooled
    }

    /// A buffer with room for `capacity` bytes, filled by `fill`: a lent one that is ours alone
    /// again, or a new one, lent from now on when the size is one the pool keeps.
    ///
    /// The buffer is tracked only after `fill` returns: while the pool holds it too, a write
    /// into it would copy its storage.
    package mutating func lend(capacity: Int, _ fill: (inout ByteBuffer) -> Void) -> ByteBuffer {
        guard capacity >= self.smallestPooled, capacity <= self.pooledCapacity else {
            var buffer = self.allocator.buffer(capacity: capacity)
            fill(&buffer)
            return buffer
        }
        var buffer = self.takeReusable() ?? self.allocator.buffer(capacity: self.pooledCapacity)
        fill(&buffer)
        if self.lent.count >= self.lentLimit { self.lent.removeFirst() }
        self.lent.append(buffer)
        return buffer
    }

    /// Forgets the lent buffers (no bulk is flowing): memory is not kept for bytes that may
    /// never come.
    package mutating func release() {
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
