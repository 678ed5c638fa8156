import NIOCore

/// The writes of a ``USBBulkChannel`` that have not gone into an OUT transfer yet: what NIO's
/// pending-writes bookkeeping does for a socket, for a channel whose "socket" is a few transfer
/// buffers. I/O-free: the channel copies flushed bytes into a free transfer's buffer with
/// ``fill(_:)`` and submits it; this type keeps the order, the flush mark, the promises and the
/// channel's writability.
struct USBOutboundQueue {
    private var writes = CircularBuffer<(buffer: ByteBuffer, promise: EventLoopPromise<Void>?)>()
    /// How many writes, from the front, a flush has released.
    private var flushedWrites = 0
    /// Bytes in every write held.
    private(set) var bufferedBytes = 0
    /// Bytes in the flushed writes: what ``fill(_:)`` can take now.
    private(set) var flushedBytes = 0
    /// Whether the channel takes more writes without going over its high water mark.
    private(set) var isWritable = true
    /// NIO's default marks (32 and 64 KiB), as a socket channel has them. (128 and 256 KiB, with
    /// the file read ahead as well, made uploads over USB no faster in the QEMU guest:
    /// docs/performance.md.)
    var waterMark = ChannelOptions.Types.WriteBufferWaterMark(low: 32 * 1024, high: 64 * 1024)

    /// Whether a flushed write waits (an empty one too: its promise is owed).
    var hasFlushedWrites: Bool { self.flushedWrites > 0 }

    /// Holds `buffer` until a flush releases it.
    mutating func append(_ buffer: ByteBuffer, promise: EventLoopPromise<Void>?) {
        self.writes.append((buffer, promise))
        self.bufferedBytes += buffer.readableBytes
        self.updateWritability()
    }

    /// Releases every write held so far to ``fill(_:)``.
    mutating func flush() {
        self.flushedWrites = self.writes.count
        self.flushedBytes = self.bufferedBytes
    }

    /// Copies flushed bytes, in order, into `destination` (at most its count). Returns how many
    /// were copied and the promises of the writes now wholly copied (an empty write's too).
    mutating func fill(
        _ destination: UnsafeMutableRawBufferPointer
    ) -> (count: Int, written: [EventLoopPromise<Void>]) {
        var count = 0
        var written: [EventLoopPromise<Void>] = []
        while self.flushedWrites > 0 {
            let wanted = self.writes[self.writes.startIndex].buffer.readableBytes
            let taken = min(wanted, destination.count - count)
            if taken > 0 {
                self.writes[self.writes.startIndex].buffer.withUnsafeReadableBytes { source in
                    UnsafeMutableRawBufferPointer(rebasing: destination[count..<(count + taken)])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: source[0..<taken]))
                }
                self.writes[self.writes.startIndex].buffer.moveReaderIndex(forwardBy: taken)
                count += taken
            }
            guard taken == wanted else { break }  // the destination is full
            let (_, promise) = self.writes.removeFirst()
            self.flushedWrites -= 1
            if let promise { written.append(promise) }
        }
        self.bufferedBytes -= count
        self.flushedBytes -= count
        self.updateWritability()
        return (count, written)
    }

    /// Takes every write held (the channel closed): their promises, to fail.
    mutating func removeAll() -> [EventLoopPromise<Void>] {
        let promises = self.writes.compactMap(\.promise)
        self.writes.removeAll()
        self.flushedWrites = 0
        self.bufferedBytes = 0
        self.flushedBytes = 0
        return promises
    }

    /// NIO's rule: unwritable above the high mark, writable again below the low one. The channel
    /// reads ``isWritable`` after each change and tells its pipeline when it differs from what
    /// the pipeline was last told.
    private mutating func updateWritability() {
        if self.isWritable && self.bufferedBytes > self.waterMark.high {
            self.isWritable = false
        } else if !self.isWritable && self.bufferedBytes < self.waterMark.low {
            self.isWritable = true
        }
    }
}
