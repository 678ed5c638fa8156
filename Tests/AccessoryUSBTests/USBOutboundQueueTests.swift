import NIOCore
import NIOPosix
import Testing

@testable import AccessoryUSB

/// What the USB channel's write queue hands to OUT transfers: every flushed byte once and in
/// order, nothing unflushed, each promise when its write's last byte is taken, and writability
/// by NIO's water-mark rule.
@Suite("USB channel: outbound queue")
struct USBOutboundQueueTests {
    static func bytes(_ count: Int, seed: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ seed &* 31) }
    }

    /// Fills transfers of `capacity` bytes until the queue has nothing flushed; returns the bytes
    /// of each transfer and, per transfer, the promises it completed.
    static func drain(
        _ queue: inout USBOutboundQueue,
        capacity: Int
    ) -> (transfers: [[UInt8]], written: [[EventLoopPromise<Void>]]) {
        var transfers: [[UInt8]] = []
        var written: [[EventLoopPromise<Void>]] = []
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 1)
        defer { buffer.deallocate() }
        while queue.hasFlushedWrites {
            let (count, promises) = queue.fill(buffer)
            transfers.append(Array(buffer[0..<count]))
            written.append(promises)
        }
        return (transfers, written)
    }

    @Test(arguments: [1, 512, 16_384, 65_536])
    func flushedBytesGoOnceAndInOrder(capacity: Int) throws {
        let loop = MultiThreadedEventLoopGroup.singleton.any()
        let sizes = [1, 16_384, 0, 40_000, 7, 16_383]
        var queue = USBOutboundQueue()
        var expected: [UInt8] = []
        var promises: [EventLoopPromise<Void>] = []
        for (index, size) in sizes.enumerated() {
            let payload = Self.bytes(size, seed: index)
            expected += payload
            let promise = loop.makePromise(of: Void.self)
            promises.append(promise)
            queue.append(ByteBuffer(bytes: payload), promise: promise)
        }
        queue.flush()
        #expect(queue.flushedBytes == expected.count)
        let (transfers, written) = Self.drain(&queue, capacity: capacity)
        defer { for promise in promises { promise.succeed(()) } }

        #expect(transfers.flatMap { $0 } == expected)
        #expect(transfers.dropLast().allSatisfy { $0.count == capacity }, "only the last transfer is short")
        #expect(queue.bufferedBytes == 0 && queue.flushedBytes == 0)
        // Each promise exactly once, in order, in the transfer that took its write's last byte.
        let order = written.flatMap { $0 }.map { ObjectIdentifier($0.futureResult) }
        #expect(order == promises.map { ObjectIdentifier($0.futureResult) })
        var end = 0
        for (index, size) in sizes.enumerated() {
            end += size
            let transfer = written.firstIndex { $0.contains { $0.futureResult === promises[index].futureResult } }
            let lastByteTransfer = end == 0 ? 0 : (end - 1) / capacity
            // An empty write completes with the write before it (or the first transfer).
            #expect(transfer == (size == 0 ? max(0, lastByteTransfer) : lastByteTransfer))
        }
    }

    @Test func unflushedWritesStayUntilTheNextFlush() throws {
        let loop = MultiThreadedEventLoopGroup.singleton.any()
        var queue = USBOutboundQueue()
        let first = loop.makePromise(of: Void.self)
        let second = loop.makePromise(of: Void.self)
        defer {
            first.succeed(())
            second.succeed(())
        }
        queue.append(ByteBuffer(bytes: Self.bytes(100, seed: 1)), promise: first)
        queue.flush()
        queue.append(ByteBuffer(bytes: Self.bytes(50, seed: 2)), promise: second)
        #expect(queue.bufferedBytes == 150 && queue.flushedBytes == 100)

        var (transfers, written) = Self.drain(&queue, capacity: 16_384)
        #expect(transfers == [Self.bytes(100, seed: 1)])
        #expect(written.flatMap { $0 }.map(\.futureResult) == [first.futureResult])
        #expect(queue.bufferedBytes == 50 && !queue.hasFlushedWrites)

        queue.flush()
        (transfers, written) = Self.drain(&queue, capacity: 16_384)
        #expect(transfers == [Self.bytes(50, seed: 2)])
        #expect(written.flatMap { $0 }.map(\.futureResult) == [second.futureResult])
    }

    @Test func writabilityFollowsTheWaterMarks() {
        var queue = USBOutboundQueue()
        queue.waterMark = .init(low: 32 * 1024, high: 64 * 1024)
        queue.append(ByteBuffer(bytes: Self.bytes(60 * 1024, seed: 0)), promise: nil)
        #expect(queue.isWritable)
        queue.append(ByteBuffer(bytes: Self.bytes(10 * 1024, seed: 1)), promise: nil)
        #expect(!queue.isWritable)
        queue.flush()
        let transfer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 1)
        defer { transfer.deallocate() }
        // 70 → 54 → 38 KiB: still at or above the low mark.
        _ = queue.fill(transfer)
        _ = queue.fill(transfer)
        #expect(!queue.isWritable)
        // 22 KiB: below it.
        _ = queue.fill(transfer)
        #expect(queue.isWritable)
    }

    @Test func removeAllGivesBackEveryPromise() {
        let loop = MultiThreadedEventLoopGroup.singleton.any()
        var queue = USBOutboundQueue()
        let promises = (0..<3).map { _ in loop.makePromise(of: Void.self) }
        for (index, promise) in promises.enumerated() {
            queue.append(ByteBuffer(bytes: Self.bytes(10_000, seed: index)), promise: promise)
            if index == 0 { queue.flush() }
        }
        let taken = queue.removeAll()
        for promise in taken { promise.fail(ChannelError.ioOnClosedChannel) }
        #expect(taken.map(\.futureResult) == promises.map(\.futureResult))
        #expect(queue.bufferedBytes == 0 && !queue.hasFlushedWrites)
    }
}
