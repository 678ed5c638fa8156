import AccessoryTransport
import NIOCore

/// The channel's two directions, on its event loop: flushed writes into free OUT transfers, and
/// completed IN transfers into reads.
extension USBBulkChannel: USBLinkBridgeSink {
    func inputsCompleted() { self.eventLoop.execute { self.deliverInputs() } }
    func outputsFreed() { self.eventLoop.execute { self.writeOut() } }

    func bridgeEnded() {
        self.eventLoop.execute {
            self.inputEnded = true
            self.deliverInputs()
        }
    }

    /// Copies flushed writes into every free OUT transfer and submits them, in order; a write's
    /// promise succeeds once its last byte is in a submitted transfer.
    func writeOut() {
        self.eventLoop.preconditionInEventLoop()
        guard self.lifecycle == .active else { return }
        self.freeOutputs += self.bridge.takeFreeOutputs()
        while self.outbound.hasFlushedWrites {
            guard let slot = self.freeOutputs.first else { break }
            let (count, written) = self.outbound.fill(
                UnsafeMutableRawBufferPointer(start: slot.buffer, count: slot.capacity)
            )
            if count > 0 {
                self.freeOutputs.removeFirst()
                // A full transfer with more bytes behind it is continued at once: no ZLP
                // (USBTransferPolicy.needsZeroLengthPacket).
                let submitted = self.bridge.submitOutput(
                    slot,
                    length: count,
                    moreBytesWaiting: self.outbound.flushedBytes > 0
                )
                guard submitted else {
                    // The bridge ended the link; its end closes the channel and fails the rest.
                    for promise in written { promise.fail(ChannelError.ioOnClosedChannel) }
                    return
                }
            }
            // Writability is synced after the promises: a promise's callback may write again.
            for promise in written { promise.succeed(()) }
            self.updateWritability()
            guard self.lifecycle == .active else { return }  // a promise's callback closed it
        }
    }

    /// Delivers what the device sent while a read is pending (or the link ended: then whatever
    /// arrived goes up before the close, as NIO reads to the end on EOF), a read of at most
    /// what the receive allocator offers at a time, and submits the transfers again. A device
    /// that sends while nobody reads is held back by its IN transfers (a read-ahead that
    /// resubmitted them at once measured no faster in the VM). A `read()` from a handler during
    /// a delivery is served by this loop, up to `maxMessagesPerRead` reads; then the next turn
    /// of the event loop goes on, so other work on it is not starved.
    func deliverInputs() {
        self.eventLoop.preconditionInEventLoop()
        guard self.lifecycle == .active, !self.delivering else { return }
        self.delivering = true
        defer { self.delivering = false }
        var reads: UInt = 0
        while self.lifecycle == .active && (self.readPending || self.inputEnded) {
            if reads >= max(1, self.maxMessagesPerRead) && !self.inputEnded {
                self.deliveryScheduled = true
                self.eventLoop.execute {
                    self.deliveryScheduled = false
                    self.deliverInputs()
                }
                return
            }
            let limit = self.recvAllocator.nextBufferSize() ?? Self.defaultReadLimit
            let slots = self.bridge.takeCompletedInputs(upTo: limit)
            guard !slots.isEmpty else { break }
            let received = self.copyAndResubmit(slots)
            guard received.readableBytes > 0 else { continue }  // only ZLPs
            reads += 1
            _ = self.recvAllocator.record(actualReadBytes: received.readableBytes)
            self.readPending = false
            self.pipeline.syncOperations.fireChannelRead(NIOAny(received))
            guard self.lifecycle == .active else { return }
            self.pipeline.syncOperations.fireChannelReadComplete()
            guard self.lifecycle == .active else { return }
            if self.autoRead && !self.inputEnded { self.pipeline.syncOperations.read() }
        }
        if self.inputEnded && self.lifecycle == .active {
            self.close0(error: ChannelError.eof, mode: .all, promise: nil)
        }
    }

    /// A read's limit when the receive allocator does not say (NIO's own allocators do).
    static let defaultReadLimit = 256 * 1024

    /// The bytes of `slots`, in order, with each slot submitted again once copied; a ZLP's slot
    /// is submitted after a back-off that grows while the device has nothing to say.
    private func copyAndResubmit(_ slots: [TransferSlot]) -> ByteBuffer {
        let size = slots.reduce(0) { $0 + Int($1.transfer.pointee.actual_length) }
        var received = self.allocator.buffer(capacity: size)
        for slot in slots {
            let length = Int(slot.transfer.pointee.actual_length)
            if length > 0 {
                received.writeBytes(UnsafeRawBufferPointer(start: slot.buffer, count: length))
                self.zeroLengthReads = 0
                self.bridge.resubmitInput(slot)
                continue
            }
            self.zeroLengthReads += 1
            let delay = USBTransferPolicy.zeroLengthReadDelay(consecutive: self.zeroLengthReads)
            if delay > 0 {
                self.eventLoop.scheduleTask(in: .milliseconds(Int64(delay))) { self.bridge.resubmitInput(slot) }
            } else {
                self.bridge.resubmitInput(slot)
            }
        }
        return received
    }
}
