import AccessoryTransport
import NIOCore
import Synchronization

/// The NIO channel of a USB link: its writes go straight into the bridge's OUT transfers and
/// completed IN transfers become its reads, on its event loop, with no socket or thread between
/// them (each byte is copied once each way: from a `ByteBuffer` into a transfer, or out of one).
///
/// It behaves as NIO's pipe channel does for the layers above: reads only when asked (or with
/// `autoRead`), delivers what arrived before the end and then closes with `ChannelError.eof`,
/// fails writes after the close, and turns unwritable above its high water mark. It cannot half
/// close, bind or connect. Unlike a socket, a close cancels the transfers in flight: bytes of a
/// write whose promise succeeded may not reach the device (a write's promise means its bytes
/// are in a submitted transfer, as a socket's means they are in the kernel's buffer).
///
/// `@unchecked Sendable`: like NIO's own channels, every stored `var` is read and written only on
/// `eventLoop` (each entry point either asserts it or hops there first), and the two properties
/// other threads read (`isActive`, `isWritable`) are atomics; the rest is immutable.
final class USBBulkChannel: @unchecked Sendable {
    enum Lifecycle { case fresh, active, closed }

    let eventLoop: any EventLoop
    let allocator = ByteBufferAllocator()
    let bridge: any USBTransferSource
    private let closePromise: EventLoopPromise<Void>
    // Set once in `init`, after `self` exists (the pipeline needs it), as NIO's channels do.
    private var channelPipeline: ChannelPipeline!

    var lifecycle = Lifecycle.fresh
    var autoRead = true
    var maxMessagesPerRead: UInt = 4
    var recvAllocator: any RecvByteBufferAllocator = AdaptiveRecvByteBufferAllocator()
    /// A read was asked for and nothing has been delivered since.
    var readPending = false
    /// `deliverInputs` is running: a `read()` from a handler it called is served by its loop,
    /// not by a nested delivery.
    var delivering = false
    /// A delivery was scheduled on the event loop and has not run yet.
    var deliveryScheduled = false
    /// The bridge ended: what completed before is delivered, then the channel closes.
    var inputEnded = false
    /// IN transfers back from the device since the last one that carried bytes, without bytes
    /// (a device with nothing to say answers each read with a ZLP: the resubmits back off).
    var zeroLengthReads = 0
    var outbound = USBOutboundQueue()
    /// Free OUT transfers taken from the bridge and not filled yet, in their order.
    var freeOutputs: [TransferSlot] = []
    private let active = Atomic<Bool>(false)
    private let writable = Atomic<Bool>(true)

    init(eventLoop: any EventLoop, bridge: any USBTransferSource) {
        self.eventLoop = eventLoop
        self.bridge = bridge
        self.closePromise = eventLoop.makePromise()
        self.channelPipeline = ChannelPipeline(channel: self)
    }

    /// Registers and activates the channel once its pipeline is set up: the pipeline hears
    /// `channelRegistered` and `channelActive`, writes made meanwhile go out, and an `autoRead`
    /// channel starts reading.
    func activate() {
        self.eventLoop.preconditionInEventLoop()
        guard self.lifecycle == .fresh else { return }
        self.lifecycle = .active
        self.active.store(true, ordering: .releasing)
        self.pipeline.syncOperations.fireChannelRegistered()
        self.pipeline.syncOperations.fireChannelActive()
        guard self.lifecycle == .active else { return }
        if self.autoRead { self.pipeline.syncOperations.read() }
        self.updateWritability()  // writes made before may have passed the high mark
        self.writeOut()
        self.deliverInputs()
    }

    /// Brings the channel's writability to the queue's and tells the pipeline of a change. By
    /// state, not by the queue's last change: a handler called in between (a write's promise)
    /// may have changed it again.
    func updateWritability() {
        let now = self.outbound.isWritable
        guard self.lifecycle == .active, self.writable.load(ordering: .acquiring) != now else { return }
        self.writable.store(now, ordering: .releasing)
        self.pipeline.syncOperations.fireChannelWritabilityChanged()
    }
}

extension USBBulkChannel: Channel {
    var pipeline: ChannelPipeline { self.channelPipeline }
    var closeFuture: EventLoopFuture<Void> { self.closePromise.futureResult }
    var localAddress: SocketAddress? { nil }
    var remoteAddress: SocketAddress? { nil }
    var parent: (any Channel)? { nil }
    var isWritable: Bool { self.writable.load(ordering: .acquiring) }
    var isActive: Bool { self.active.load(ordering: .acquiring) }
    var _channelCore: any ChannelCore { self }
    var syncOptions: (any NIOSynchronousChannelOptions)? { SynchronousOptions(channel: self) }

    func setOption<Option: ChannelOption>(_ option: Option, value: Option.Value) -> EventLoopFuture<Void> {
        if self.eventLoop.inEventLoop {
            return self.eventLoop.makeCompletedFuture { try self.setOption0(option, value: value) }
        }
        return self.eventLoop.submit { try self.setOption0(option, value: value) }
    }

    func getOption<Option: ChannelOption>(_ option: Option) -> EventLoopFuture<Option.Value> {
        if self.eventLoop.inEventLoop {
            return self.eventLoop.makeCompletedFuture { try self.getOption0(option) }
        }
        return self.eventLoop.submit { try self.getOption0(option) }
    }

    /// The options a pipe channel has that make sense here; others are unsupported.
    func setOption0<Option: ChannelOption>(_ option: Option, value: Option.Value) throws {
        self.eventLoop.preconditionInEventLoop()
        switch (option, value) {
        case (is ChannelOptions.Types.AutoReadOption, let value as Bool):
            let wasOff = !self.autoRead
            self.autoRead = value
            if value && wasOff && self.lifecycle == .active { self.pipeline.syncOperations.read() }
        case (is ChannelOptions.Types.MaxMessagesPerReadOption, let value as UInt):
            self.maxMessagesPerRead = value
        case (is ChannelOptions.Types.RecvAllocatorOption, let value as any RecvByteBufferAllocator):
            self.recvAllocator = value
        case (
            is ChannelOptions.Types.WriteBufferWaterMarkOption, let value as ChannelOptions.Types.WriteBufferWaterMark
        ):
            self.outbound.waterMark = value
        case (is ChannelOptions.Types.AllowRemoteHalfClosureOption, let value as Bool) where !value:
            break
        default:
            throw ChannelError.operationUnsupported
        }
    }

    func getOption0<Option: ChannelOption>(_ option: Option) throws -> Option.Value {
        self.eventLoop.preconditionInEventLoop()
        let value: Any
        switch option {
        case is ChannelOptions.Types.AutoReadOption: value = self.autoRead
        case is ChannelOptions.Types.MaxMessagesPerReadOption: value = self.maxMessagesPerRead
        case is ChannelOptions.Types.RecvAllocatorOption: value = self.recvAllocator
        case is ChannelOptions.Types.WriteBufferWaterMarkOption: value = self.outbound.waterMark
        case is ChannelOptions.Types.BufferedWritableBytesOption: value = self.outbound.bufferedBytes
        case is ChannelOptions.Types.AllowRemoteHalfClosureOption: value = false
        default: throw ChannelError.operationUnsupported
        }
        guard let typed = value as? Option.Value else { throw ChannelError.operationUnsupported }
        return typed
    }

    /// The options, without a future, on the event loop (what `syncOptions` gives NIO's channels).
    struct SynchronousOptions: NIOSynchronousChannelOptions {
        let channel: USBBulkChannel

        func setOption<Option: ChannelOption>(_ option: Option, value: Option.Value) throws {
            try self.channel.setOption0(option, value: value)
        }

        func getOption<Option: ChannelOption>(_ option: Option) throws -> Option.Value {
            try self.channel.getOption0(option)
        }
    }
}

extension USBBulkChannel: ChannelCore {
    func localAddress0() throws -> SocketAddress { throw ChannelError.operationUnsupported }
    func remoteAddress0() throws -> SocketAddress { throw ChannelError.operationUnsupported }

    // Registration, binding and connecting are the transport's business (`activate()`).
    func register0(promise: EventLoopPromise<Void>?) { promise?.fail(ChannelError.operationUnsupported) }
    func registerAlreadyConfigured0(promise: EventLoopPromise<Void>?) {
        promise?.fail(ChannelError.operationUnsupported)
    }
    func bind0(to: SocketAddress, promise: EventLoopPromise<Void>?) { promise?.fail(ChannelError.operationUnsupported) }
    func connect0(to: SocketAddress, promise: EventLoopPromise<Void>?) {
        promise?.fail(ChannelError.operationUnsupported)
    }

    func write0(_ data: NIOAny, promise: EventLoopPromise<Void>?) {
        self.eventLoop.preconditionInEventLoop()
        guard self.lifecycle != .closed else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        guard let buffer = self.tryUnwrapData(data, as: ByteBuffer.self) else {
            promise?.fail(ChannelError.operationUnsupported)  // a FileRegion: a socket's business
            return
        }
        self.outbound.append(buffer, promise: promise)
        self.updateWritability()
    }

    func flush0() {
        self.eventLoop.preconditionInEventLoop()
        guard self.lifecycle != .closed else { return }
        self.outbound.flush()
        if self.lifecycle == .active { self.writeOut() }
    }

    /// Asks for a read, which comes later, never from inside this call (as NIO's channels
    /// register interest and read on the next turn of the loop): a handler that asks for more in
    /// `channelReadComplete` gets it from the delivery loop under way, and one that asks from
    /// elsewhere on the next task of the event loop.
    func read0() {
        self.eventLoop.preconditionInEventLoop()
        guard self.lifecycle != .closed else { return }
        self.readPending = true  // before `activate()`, kept for it (as NIO keeps it)
        guard self.lifecycle == .active, !self.delivering, !self.deliveryScheduled else { return }
        self.deliveryScheduled = true
        self.eventLoop.execute {
            self.deliveryScheduled = false
            self.deliverInputs()
        }
    }

    func close0(error: any Error, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        self.eventLoop.preconditionInEventLoop()
        guard self.lifecycle != .closed else {
            promise?.fail(ChannelError.alreadyClosed)
            return
        }
        guard mode == .all else {
            promise?.fail(ChannelError.operationUnsupported)  // a USB link cannot half close
            return
        }
        let wasActive = self.lifecycle == .active
        self.lifecycle = .closed
        self.active.store(false, ordering: .releasing)
        // The first end wins: a device's failure keeps its reason; an orderly close cancels
        // every transfer (the layers above abandon what they did not wait for).
        self.bridge.fail(nil)
        self.freeOutputs = []
        for pending in self.outbound.removeAll() { pending.fail(error) }
        promise?.succeed(())
        if wasActive {
            self.pipeline.syncOperations.fireChannelInactive()
            self.pipeline.syncOperations.fireChannelUnregistered()
        }
        // Later, as NIO's channels do: the caller may still be walking the pipeline.
        self.eventLoop.execute {
            self.removeHandlers(pipeline: self.pipeline)
            self.closePromise.succeed(())
        }
    }

    func triggerUserOutboundEvent0(_ event: Any, promise: EventLoopPromise<Void>?) {
        promise?.fail(ChannelError.operationUnsupported)
    }

    // What reaches the pipeline's end unhandled is dropped, as NIO's channels drop it.
    func channelRead0(_ data: NIOAny) {}
    func errorCaught0(error: any Error) {}
}
