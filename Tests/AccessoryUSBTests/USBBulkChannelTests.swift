import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import AccessoryUSB

/// The USB link's NIO channel against transfers of the test's own (no libusb device: the QEMU
/// test, scripts/usb-vm-guest-test, runs it on a real USB stack): reads only on demand and in
/// order, no nested delivery, the end after what came before it, writes cut into transfers in
/// order, and writability by state.
@Suite("USB channel")
struct USBBulkChannelTests {
    /// Transfers the test completes and frees by hand; records what the channel submits.
    final class TestTransfers: USBTransferSource {
        struct State {
            var completed: [TransferSlot] = []
            var free: [TransferSlot] = []
            var resubmitted: [TransferSlot] = []
            var written: [(bytes: [UInt8], more: Bool)] = []
            var failures: [String?] = []
        }
        let state = Mutex(State())

        func takeCompletedInputs(upTo limit: Int) -> [TransferSlot] {
            self.state.withLock { state in
                let count = USBLinkBridge.readCount(of: state.completed, upTo: limit)
                defer { state.completed.removeFirst(count) }
                return Array(state.completed.prefix(count))
            }
        }

        func takeFreeOutputs() -> [TransferSlot] {
            self.state.withLock { state in
                defer { state.free = [] }
                return state.free
            }
        }

        func resubmitInput(_ slot: TransferSlot) { self.state.withLock { $0.resubmitted.append(slot) } }

        func submitOutput(_ slot: TransferSlot, length: Int, moreBytesWaiting: Bool) -> Bool {
            let bytes = Array(UnsafeBufferPointer(start: slot.buffer, count: length))
            self.state.withLock { $0.written.append((bytes, moreBytesWaiting)) }
            return true
        }

        func fail(_ reason: String?) { self.state.withLock { $0.failures.append(reason) } }
    }

    /// Records what reaches the end of the pipeline, and how deeply deliveries nest.
    final class Recorder: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        struct Log {
            var events: [String] = []
            var bytes: [UInt8] = []
            var depth = 0
            var deepest = 0
        }
        let log = Mutex(Log())
        /// Asks for the next read from `channelReadComplete`, as the HTTP link does.
        let readsAgain: Bool
        let closesOnRead: Bool

        init(readsAgain: Bool = false, closesOnRead: Bool = false) {
            self.readsAgain = readsAgain
            self.closesOnRead = closesOnRead
        }

        var events: [String] { self.log.withLock { $0.events } }

        private func enter(_ event: String) {
            self.log.withLock {
                $0.events.append(event)
                $0.depth += 1
                $0.deepest = max($0.deepest, $0.depth)
            }
        }
        private func leave() { self.log.withLock { $0.depth -= 1 } }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = Self.unwrapInboundIn(data)
            self.enter("read \(buffer.readableBytes)")
            self.log.withLock { $0.bytes += Array(buffer.readableBytesView) }
            if self.closesOnRead { context.close(promise: nil) }
            self.leave()
        }

        func channelReadComplete(context: ChannelHandlerContext) {
            self.enter("complete")
            if self.readsAgain { context.read() }
            self.leave()
        }

        func channelInactive(context: ChannelHandlerContext) { self.log.withLock { $0.events.append("inactive") } }
    }

    static func input(_ bytes: [UInt8]) throws -> TransferSlot {
        let slot = try #require(TransferSlot(capacity: 16_384, isInput: true))
        bytes.withUnsafeBufferPointer { slot.buffer.update(from: $0.baseAddress!, count: $0.count) }
        slot.transfer.pointee.actual_length = Int32(bytes.count)
        return slot
    }

    static func bytes(_ count: Int, seed: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ seed) }
    }

    /// An open channel with `recorder` in its pipeline, reading on demand, reads of 32 KiB.
    static func open(_ transfers: TestTransfers, _ recorder: Recorder) async throws -> USBBulkChannel {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let channel = USBBulkChannel(eventLoop: loop, bridge: transfers)
        try await loop.submit {
            try channel.pipeline.syncOperations.addHandler(recorder)
            try channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
            try channel.syncOptions?.setOption(
                ChannelOptions.recvAllocator,
                value: FixedSizeRecvByteBufferAllocator(capacity: 32_768)
            )
            channel.activate()
        }.get()
        return channel
    }

    /// Lets the tasks the channel queued on its loop run.
    static func settle(_ channel: USBBulkChannel) async throws {
        for _ in 0..<4 { try await channel.eventLoop.submit {}.get() }
    }

    static func close(_ channel: USBBulkChannel) async throws {
        try? await channel.close()
        try await channel.closeFuture.get()
    }

    @Test func readsComeOnlyWhenAskedInOrderAndNoLargerThanTheAllocatorSays() async throws {
        let transfers = TestTransfers()
        let recorder = Recorder()
        let channel = try await Self.open(transfers, recorder)
        let payloads = [Self.bytes(16_384, seed: 1), Self.bytes(16_384, seed: 2), Self.bytes(100, seed: 3)]
        let slots = try payloads.map(Self.input)
        transfers.state.withLock { $0.completed = slots }
        channel.inputsCompleted()
        try await Self.settle(channel)
        #expect(recorder.events.isEmpty, "nothing is delivered before a read is asked for")

        channel.read()
        try await Self.settle(channel)
        #expect(recorder.events == ["read 32768", "complete"])
        #expect(
            transfers.state.withLock { $0.resubmitted.map(ObjectIdentifier.init) }
                == slots[0..<2].map(ObjectIdentifier.init)
        )

        channel.read()
        try await Self.settle(channel)
        #expect(recorder.events == ["read 32768", "complete", "read 100", "complete"])
        #expect(recorder.log.withLock { $0.bytes } == payloads.flatMap { $0 })
        try await Self.close(channel)
    }

    /// A read asked for while the pipeline is set up, before the channel is active, is kept
    /// for the activation (as NIO's channels keep it).
    @Test func aReadAskedForBeforeActivationIsServedOnceActive() async throws {
        let transfers = TestTransfers()
        let recorder = Recorder()
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let channel = USBBulkChannel(eventLoop: loop, bridge: transfers)
        let payload = Self.bytes(700, seed: 5)
        let slot = try Self.input(payload)
        transfers.state.withLock { $0.completed = [slot] }
        try await loop.submit {
            try channel.pipeline.syncOperations.addHandler(recorder)
            try channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
            channel.pipeline.syncOperations.read()
            channel.activate()
        }.get()
        try await Self.settle(channel)
        #expect(recorder.events == ["read 700", "complete"])
        try await Self.close(channel)
    }

    @Test func aReadAskedForInReadCompleteIsServedWithoutNesting() async throws {
        let transfers = TestTransfers()
        let recorder = Recorder(readsAgain: true)
        let channel = try await Self.open(transfers, recorder)
        let payloads = (0..<10).map { Self.bytes(16_384, seed: $0) }
        let slots = try payloads.map(Self.input)
        transfers.state.withLock { $0.completed = slots }
        channel.read()
        try await Self.settle(channel)
        #expect(recorder.log.withLock { $0.bytes } == payloads.flatMap { $0 })
        #expect(recorder.log.withLock { $0.deepest } == 1, "a delivery never runs inside another")
        #expect(recorder.events.filter { $0.hasPrefix("read") }.count == 5)
        try await Self.close(channel)
    }

    @Test func theEndDeliversWhatCameBeforeItThenCloses() async throws {
        let transfers = TestTransfers()
        let recorder = Recorder()
        let channel = try await Self.open(transfers, recorder)
        let payload = Self.bytes(5_000, seed: 9)
        let slot = try Self.input(payload)
        transfers.state.withLock { $0.completed = [slot] }
        let unsent = try await channel.eventLoop.submit { () -> EventLoopFuture<Void> in
            let promise = channel.eventLoop.makePromise(of: Void.self)
            channel.write(ByteBuffer(bytes: [1, 2, 3]), promise: promise)  // never flushed
            return promise.futureResult
        }.get()
        channel.bridgeEnded()  // no read was asked for: the end delivers regardless
        try await channel.closeFuture.get()
        #expect(recorder.events == ["read 5000", "complete", "inactive"])
        #expect(recorder.log.withLock { $0.bytes } == payload)
        await #expect(throws: ChannelError.self) { try await unsent.get() }
        #expect(transfers.state.withLock { $0.failures.count } == 1, "the close ends the transfers")
    }

    @Test func aCloseInChannelReadEndsTheDelivery() async throws {
        let transfers = TestTransfers()
        let recorder = Recorder(closesOnRead: true)
        let channel = try await Self.open(transfers, recorder)
        let slots = try [Self.input(Self.bytes(10, seed: 1)), Self.input(Self.bytes(10, seed: 2))]
        transfers.state.withLock { $0.completed = slots }
        channel.read()
        try await channel.closeFuture.get()
        #expect(recorder.events == ["read 20", "inactive"])
    }

    @Test func writesGoOutInOrderAndContinueWithoutAZLPWhileMoreWaits() async throws {
        let transfers = TestTransfers()
        let channel = try await Self.open(transfers, Recorder())
        let outputs = try (0..<2).map { _ in try #require(TransferSlot(capacity: 16_384, isInput: false)) }
        transfers.state.withLock { $0.free = outputs }
        let payload = Self.bytes(40_000, seed: 4)
        let written = channel.eventLoop.makePromise(of: Void.self)
        channel.writeAndFlush(ByteBuffer(bytes: payload), promise: written)
        let done = Mutex(false)
        written.futureResult.whenComplete { _ in done.withLock { $0 = true } }
        try await Self.settle(channel)
        #expect(transfers.state.withLock { $0.written.map(\.bytes.count) } == [16_384, 16_384])
        #expect(transfers.state.withLock { $0.written.map(\.more) } == [true, true])
        #expect(!done.withLock { $0 }, "7232 bytes still wait for a transfer")

        transfers.state.withLock { $0.free = [outputs[0]] }
        channel.outputsFreed()
        try await written.futureResult.get()
        let sent = transfers.state.withLock { $0.written }
        #expect(sent.map(\.bytes.count) == [16_384, 16_384, 7_232])
        #expect(sent.last?.more == false)
        #expect(sent.flatMap(\.bytes) == payload)
        try await Self.close(channel)
    }

    /// A write's promise that writes again above the high mark leaves the channel unwritable
    /// (the queue's earlier "became writable" must not be applied after it).
    @Test func writabilityFollowsTheQueueWhenAPromiseWritesAgain() async throws {
        let transfers = TestTransfers()
        let channel = try await Self.open(transfers, Recorder())
        let output = try #require(TransferSlot(capacity: 16_384, isInput: false))
        let writable = try await channel.eventLoop.submit { () -> Bool in
            try channel.syncOptions?.setOption(
                ChannelOptions.writeBufferWaterMark,
                value: .init(low: 1_024, high: 2_048)
            )
            let first = channel.eventLoop.makePromise(of: Void.self)
            first.futureResult.whenSuccess {
                channel.write(ByteBuffer(bytes: Self.bytes(3_000, seed: 2)), promise: nil)
            }
            channel.write(ByteBuffer(bytes: Self.bytes(3_000, seed: 1)), promise: first)
            #expect(!channel.isWritable)
            transfers.state.withLock { $0.free = [output] }
            channel.flush()
            return channel.isWritable
        }.get()
        #expect(!writable, "3000 bytes wait above the 2048-byte mark")
        try await Self.close(channel)
    }
}
