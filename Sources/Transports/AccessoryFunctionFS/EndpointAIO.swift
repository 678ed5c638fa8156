import CLinuxAIO

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Linux native AIO on FunctionFS endpoint files: up to ``depth`` transfers queued in the kernel
/// at once, each in a numbered slot, their completions signalled on an eventfd (``eventDescriptor``,
/// for `poll`) and collected with ``reap()``; any of them abandoned with ``cancel(slot:)``.
///
/// This is how adbd drives FunctionFS: a blocking `write` keeps one USB request queued on the
/// endpoint (idle while the thread fetches the next chunk) and can only be freed by a signal or
/// by the endpoint being disabled. Owned by one thread; not `Sendable`.
final class EndpointAIO {
    /// One finished transfer: its slot, and the bytes it moved or `-errno`.
    struct Completion {
        let slot: Int
        let result: Int
    }

    let depth: Int
    /// Becomes readable when a transfer completes.
    let eventDescriptor: CInt
    private let context: aio_context_t
    private let blocks: UnsafeMutablePointer<iocb>
    private let events: UnsafeMutablePointer<io_event>

    /// Sets up a context for `depth` transfers, or returns the `errno` that refused it (a kernel
    /// built without `CONFIG_AIO` answers `ENOSYS`).
    init?(depth: Int, failure: inout CInt) {
        var context: aio_context_t = 0
        let result = clinuxaio_setup(UInt32(depth), &context)
        guard result == 0 else {
            failure = -result
            return nil
        }
        let eventDescriptor = clinuxaio_eventfd()
        guard eventDescriptor >= 0 else {
            failure = -eventDescriptor
            _ = clinuxaio_destroy(context)
            return nil
        }
        self.depth = depth
        self.context = context
        self.eventDescriptor = eventDescriptor
        self.blocks = .allocate(capacity: depth)
        self.blocks.initialize(repeating: iocb(), count: depth)
        self.events = .allocate(capacity: depth)
        self.events.initialize(repeating: io_event(), count: depth)
    }

    deinit {
        // Waits for (and cancels) what is still in flight before the blocks are freed.
        _ = clinuxaio_destroy(self.context)
        _ = close(self.eventDescriptor)
        self.blocks.deallocate()
        self.events.deallocate()
    }

    /// Queues a read or write of `length` bytes at `buffer` in `slot`, which must be free until
    /// its completion is reaped. Returns 0, or the `errno` that refused it.
    func submit(slot: Int, isWrite: Bool, descriptor: CInt, buffer: UnsafeMutableRawPointer, length: Int) -> CInt {
        clinuxaio_prepare(
            self.blocks + slot,
            isWrite ? 1 : 0,
            descriptor,
            buffer,
            length,
            self.eventDescriptor,
            UInt64(slot)
        )
        while true {
            let result = clinuxaio_submit(self.context, self.blocks + slot)
            if result == 1 { return 0 }
            if result == -EINTR || result == -EAGAIN { continue }
            return result < 0 ? -result : EIO
        }
    }

    /// Asks the kernel to abandon the transfer in `slot`. Returns whether its completion is still
    /// to be reaped: yes on current kernels (they answer `EINPROGRESS` and deliver the event,
    /// usually with `ECONNRESET`), and when it had completed already; no only where the kernel
    /// reports it cancelled outright (old kernels), and the slot is then free at once.
    func cancel(slot: Int) -> Bool {
        clinuxaio_cancel(self.context, self.blocks + slot) != 0
    }

    /// Clears the eventfd and returns the transfers that have completed, without waiting.
    func reap() -> [Completion] {
        var counter: UInt64 = 0
        _ = read(self.eventDescriptor, &counter, MemoryLayout<UInt64>.size)
        var completions: [Completion] = []
        while true {
            let count = clinuxaio_reap(self.context, self.depth, self.events)
            if count == -EINTR { continue }
            guard count > 0 else { return completions }
            for index in 0..<Int(count) {
                let event = self.events[index]
                completions.append(Completion(slot: Int(event.data), result: Int(event.res)))
            }
        }
    }
}
