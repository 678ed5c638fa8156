import AccessoryTransport
import CLibUSB
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What a ``USBLinkBridge`` tells the channel that carries its bytes (``USBBulkChannel``).
/// Called on libusb's event thread or on whichever thread failed the link: the channel hops to
/// its event loop.
protocol USBLinkBridgeSink: AnyObject, Sendable {
    /// IN transfers completed (``USBLinkBridge/takeCompletedInputs()`` has them); called once
    /// until they are taken.
    func inputsCompleted()
    /// OUT transfers came back free (``USBLinkBridge/takeFreeOutputs()``); called once until
    /// they are taken.
    func outputsFreed()
    /// The link ended (``USBLinkBridge/fail(_:)``): every transfer is being cancelled.
    func bridgeEnded()
}

/// Drives a claimed interface's bulk endpoints for the NIO channel the HTTP layer sees
/// (``USBBulkChannel``): it owns the transfers, submits them, and hands completed ones over.
///
/// Threads: one runs libusb's event loop (and tears everything down at the end); the channel's
/// event loop copies its writes into free OUT transfers and submits them, and copies completed
/// IN transfers into its reads and resubmits them (USBBulkChannel+Transfers.swift). Any failure
/// (unplug, stall, timeout) records a reason, cancels every transfer and tells the channel,
/// which ends the stream at once; the HTTP layer reads the reason from the diagnostics.
final class USBLinkBridge: Sendable {
    struct State {
        var closing = false
        var failure: String?
        /// The failure was the write timeout (``checkWriteProgress()``): the stream's end cause.
        var failedByWriteTimeout = false
        var inFlight = 0
        /// IN transfers back from the device that the channel has not taken yet, in order.
        var completedInputs: [TransferSlot] = []
        var freeOutputs: [TransferSlot] = []
        var slots: [TransferSlot] = []
        /// Told of completions and of the end; `nil` after the teardown (breaking the cycle).
        var sink: (any USBLinkBridgeSink)?
        /// The sink was told of completed inputs / freed outputs that it has not taken yet.
        var inputsAnnounced = false
        var outputsAnnounced = false
        /// Bytes in OUT transfers submitted and not back yet: what the device has not taken.
        var outputBytesInFlight = 0
        /// Since when OUT transfers have waited without one coming back: the write timeout
        /// counts from here (`nil` while none is in flight). On the suspending clock, as
        /// libusb's own timeouts are (CLOCK_MONOTONIC): a host asleep is not a device that
        /// stopped reading.
        var outputWaitingSince: SuspendingClock.Instant?
        var haltedEndpoint: UInt8?
        /// Bytes the device has taken from OUT transfers: while 0, a stall is carried on from.
        var outputBytesSent = 0
        /// Bytes the device has sent on the IN endpoint (a silent device explains itself by it).
        var inputBytesReceived = 0
        /// A stall before the first byte is being cleared: OUT transfers that stalled (in their
        /// order), and those the writer made meanwhile, held back so that none overtakes them.
        var clearingHalt = false
        var haltsCleared = 0
        var stalledOutputs: [TransferSlot] = []
        var heldOutputs: [(TransferSlot, Int)] = []
        /// The failure was an unspecific transfer error, which is also what an unplug looks like
        /// before libusb notices the device is gone.
        var failureMayBeUnplug = false
    }

    let handle: LibUSBDeviceHandle
    let interface: USBLinkInterface
    let policy: USBTransferPolicy
    let name: String
    let state = TrackedMutex(State())
    /// Called once, when the interface has been released after the end (or the bridge never
    /// started its threads): what ``OpenedByteStream/waitUntilReleased()`` waits for, so that a
    /// reopen, another program or the process's exit finds the interface free.
    private let onReleased: @Sendable () -> Void

    init(
        handle: LibUSBDeviceHandle,
        interface: USBLinkInterface,
        policy: USBTransferPolicy,
        name: String,
        onReleased: @escaping @Sendable () -> Void = {}
    ) {
        self.handle = handle
        self.interface = interface
        self.policy = policy
        self.name = name
        self.onReleased = onReleased
    }

    /// Why the link ended, if it failed.
    var failure: String? { self.state.withLock { $0.failure } }

    /// The stream's end cause for the HTTP link, when the bridge ended it by its write timeout.
    var endCause: TransportError? {
        self.state.withLock { state in
            guard state.failedByWriteTimeout, let failure = state.failure else { return nil }
            return TransportError(.writeTimedOut, failure)
        }
    }

    /// Whether the device has sent nothing on this link yet.
    var receivedNothing: Bool { self.state.withLock { $0.inputBytesReceived == 0 } }

    /// ``failure``, after waiting up to a second to tell an unplug from another transfer error
    /// (the kernel fails the transfers a moment before it removes the device node).
    func explainedFailure(deviceNode: String) async -> String? {
        let (failure, mayBeUnplug) = self.state.withLock { ($0.failure, $0.failureMayBeUnplug) }
        guard let failure, mayBeUnplug else { return failure }
        for _ in 0..<20 {
            if access(deviceNode, F_OK) != 0 {
                return "the USB device \(self.name) was disconnected (\(failure))"
            }
            await sleepUncancelled(for: .milliseconds(50))  // a cancelled open still tells an unplug
        }
        return failure
    }

    /// Allocates the transfers, submits the reads and starts libusb's event thread; `sink` hears
    /// of completions from then on.
    func start(sink: any USBLinkBridgeSink) throws(TransportError) {
        let inSize = self.policy.transferSize(maxPacketSize: self.interface.input.maxPacketSize)
        let outSize = self.policy.transferSize(maxPacketSize: self.interface.output.maxPacketSize)
        let count = max(1, self.policy.transfersInFlight)
        var inputs: [TransferSlot] = []
        var outputs: [TransferSlot] = []
        for _ in 0..<count {
            guard let input = TransferSlot(capacity: inSize, isInput: true),
                let output = TransferSlot(capacity: outSize, isInput: false)
            else {
                // Nothing was submitted and no thread runs: give everything back here.
                self.handle.releaseInterface(self.interface.interfaceNumber)
                self.onReleased()
                throw TransportError(.openFailed, "libusb could not allocate transfers for \(self.name)")
            }
            input.bridge = self
            output.bridge = self
            inputs.append(input)
            outputs.append(output)
        }
        self.state.withLock {
            $0.slots = inputs + outputs
            $0.freeOutputs = outputs
            $0.sink = sink
        }
        for input in inputs {
            if let error = self.submit(input, length: input.capacity) {
                self.fail("could not start reading from \(self.name): \(error)")
                break
            }
        }
        do {
            try DetachedThread.start { self.runEvents() }
        } catch {
            // No thread tears down: the interface is released here (its transfers stay
            // allocated, as after the five-second give-up below).
            self.fail("could not start the USB threads: \(error)")
            self.state.withLock { $0.sink = nil }  // no teardown will break the cycle
            self.handle.releaseInterface(self.interface.interfaceNumber)
            self.onReleased()
            throw TransportError(
                .openFailed,
                "could not start the USB threads for \(self.name): errno \(error.rawValue)"
            )
        }
    }

    // MARK: Submitting and completing

    /// Submits `slot` with `length` bytes; returns the libusb error if it was not submitted.
    /// `moreBytesWaiting`: for a write, whether the channel already holds the next one's bytes
    /// (then no zero-length packet follows it, ``USBTransferPolicy/needsZeroLengthPacket(afterWriting:maxPacketSize:moreBytesWaiting:)``).
    func submit(
        _ slot: TransferSlot,
        length: Int,
        moreBytesWaiting: Bool = false,
        bypassingHold: Bool = false
    ) -> LibUSBError? {
        let endpoint = slot.isInput ? self.interface.input.address : self.interface.output.address
        // No libusb timeout: its clock starts at the submission, so the last of several OUT
        // transfers in flight would time out behind the others on a slow device. The event
        // thread times out a device that takes no transfer instead (`checkWriteProgress`).
        let timeout: UInt32 = 0
        let context = Unmanaged.passUnretained(slot).toOpaque()
        libusb_fill_bulk_transfer(
            slot.transfer,
            self.handle.pointer,
            endpoint,
            slot.buffer,
            Int32(length),
            { transfer in
                guard let transfer, let context = transfer.pointee.user_data else { return }
                let slot = Unmanaged<TransferSlot>.fromOpaque(context).takeUnretainedValue()
                slot.bridge?.completed(slot)
            },
            context,
            timeout
        )
        var flags: UInt8 = 0
        if !slot.isInput
            && self.policy.needsZeroLengthPacket(
                afterWriting: length,
                maxPacketSize: self.interface.output.maxPacketSize,
                moreBytesWaiting: moreBytesWaiting
            )
        {
            flags |= UInt8(LIBUSB_TRANSFER_ADD_ZERO_PACKET.rawValue)
        }
        slot.transfer.pointee.flags = flags
        let admitted = self.state.withLock { state -> Bool in
            guard !state.closing else { return false }
            if !slot.isInput && state.clearingHalt && !bypassingHold {
                state.heldOutputs.append((slot, length))
                return false
            }
            state.inFlight += 1
            if !slot.isInput {
                if state.outputBytesInFlight == 0 { state.outputWaitingSince = .now }
                state.outputBytesInFlight += length
            }
            slot.submitted = true
            return true
        }
        guard admitted else { return nil }
        let result = libusb_submit_transfer(slot.transfer)
        if result != 0 {
            self.state.withLock { state in
                state.inFlight -= 1
                if !slot.isInput { state.outputBytesInFlight -= length }
                slot.submitted = false
            }
            return LibUSBError(rawValue: result)
        }
        // A failure between the check above and the submission cancelled everything it saw;
        // this transfer was not among them.
        if self.state.withLock({ $0.closing }) { _ = libusb_cancel_transfer(slot.transfer) }
        return nil
    }

    /// libusb's completion callback (on the event thread).
    private func completed(_ slot: TransferSlot) {
        let status = slot.transfer.pointee.status
        let direction = slot.isInput ? "reading from" : "writing to"
        let endpoint = slot.isInput ? self.interface.input.address : self.interface.output.address
        var problem: String?
        var halted: UInt8?
        switch status {
        case LIBUSB_TRANSFER_COMPLETED:
            break
        case LIBUSB_TRANSFER_CANCELLED:
            break
        case LIBUSB_TRANSFER_NO_DEVICE:
            problem = "the USB device \(self.name) was disconnected (LIBUSB_TRANSFER_NO_DEVICE while \(direction) it)"
        case LIBUSB_TRANSFER_STALL:
            problem =
                "endpoint 0x\(String(endpoint, radix: 16)) of \(self.name) stalled while \(direction) it; the halt was cleared and the link must be reopened"
            halted = endpoint
        case LIBUSB_TRANSFER_TIMED_OUT:  // not asked for (no libusb timeouts: `checkWriteProgress`)
            problem = "\(direction) \(self.name) timed out (LIBUSB_TRANSFER_TIMED_OUT)"
        case LIBUSB_TRANSFER_OVERFLOW:
            problem = "the device \(self.name) sent more than was asked for (LIBUSB_TRANSFER_OVERFLOW)"
        default:
            problem =
                "\(direction) \(self.name) failed (\(status == LIBUSB_TRANSFER_ERROR ? "LIBUSB_TRANSFER_ERROR" : "libusb transfer status \(status.rawValue)"))"
        }
        let actualLength = Int(slot.transfer.pointee.actual_length)
        // What follows the completion: a slot back to its thread, the link's end, or a stall
        // carried on from (the first of a clearing starts it; later ones join it).
        enum Next { case nothing, wake(any USBLinkBridgeSink), fail, startClearing, joinClearing }
        let next: Next = self.state.withLock { state in
            state.inFlight -= 1
            slot.submitted = false
            if slot.isInput {
                state.inputBytesReceived += actualLength
            } else {
                state.outputBytesSent += actualLength
                state.outputBytesInFlight -= Int(slot.transfer.pointee.length)
                state.outputWaitingSince = state.outputBytesInFlight > 0 ? .now : nil
            }
            if halted != nil, let starts = Self.carryOn(afterStallOf: slot, actualLength: actualLength, state: &state) {
                return starts ? .startClearing : .joinClearing
            }
            if let halted { state.haltedEndpoint = halted }
            if status == LIBUSB_TRANSFER_ERROR && !state.closing { state.failureMayBeUnplug = true }
            if problem != nil { return .fail }
            guard !state.closing, status == LIBUSB_TRANSFER_COMPLETED else { return .nothing }
            // One announcement until the channel takes them: a hop to its event loop per
            // batch, not per transfer.
            let announced: Bool
            if slot.isInput {
                state.completedInputs.append(slot)
                announced = state.inputsAnnounced
                state.inputsAnnounced = true
            } else {
                state.freeOutputs.append(slot)
                announced = state.outputsAnnounced
                state.outputsAnnounced = true
            }
            guard !announced, let sink = state.sink else { return .nothing }
            return .wake(sink)
        }
        switch next {
        case .startClearing: self.resendAfterClearingHalt()
        case .joinClearing, .nothing: break
        case .fail: self.fail(problem)
        case .wake(let sink): if slot.isInput { sink.inputsCompleted() } else { sink.outputsFreed() }
        }
    }

    /// Ends the link: records `reason` (nil: an orderly close by the HTTP side), cancels every
    /// transfer and tells the channel. Only the first call counts.
    func fail(_ reason: String?) { self.end(reason, byWriteTimeout: false) }

    /// ``fail(_:)``, saying whether it was the write timeout (the stream's end cause).
    private func end(_ reason: String?, byWriteTimeout: Bool) {
        let ended: (pending: [TransferSlot], sink: (any USBLinkBridgeSink)?)? = self.state.withLock { state in
            guard !state.closing else { return nil }
            state.closing = true
            state.failure = reason
            state.failedByWriteTimeout = byWriteTimeout && reason != nil
            return (state.slots.filter(\.submitted), state.sink)
        }
        guard let ended else { return }
        for slot in ended.pending { _ = libusb_cancel_transfer(slot.transfer) }
        ended.sink?.bridgeEnded()
    }

    // MARK: The event thread

    private func runEvents() {
        let clock = ContinuousClock()
        var closedAt: ContinuousClock.Instant?
        while true {
            _ = self.handle.device.context.handleEvents(milliseconds: 100)
            let (closing, inFlight) = self.state.withLock { ($0.closing, $0.inFlight) }
            guard closing else {
                self.checkWriteProgress()
                continue
            }
            if inFlight == 0 { break }
            let started = closedAt ?? clock.now
            closedAt = started
            if clock.now - started > .seconds(5) {
                // Five seconds after the end a transfer has still not come back: release the
                // interface, but leave the transfers and so the handle allocated rather than
                // free what libusb may still use.
                self.state.withLock { $0.sink = nil }  // the channel, though, can go
                self.handle.releaseInterface(self.interface.interfaceNumber)
                self.onReleased()
                return
            }
        }
        self.teardown()
        self.onReleased()
    }

    /// Ends the link when OUT transfers have waited the write timeout without one coming back:
    /// the device stopped reading. (However many are in flight: a slow device that takes a
    /// transfer now and then is not timed out.)
    private func checkWriteProgress() {
        let limit = self.policy.writeTimeoutMilliseconds
        guard limit > 0,
            let since = self.state.withLock({ $0.outputWaitingSince }),
            SuspendingClock.now - since > .milliseconds(Int64(limit))
        else { return }
        self.end(
            "writing to \(self.name) timed out after \(limit) ms (the device stopped reading)",
            byWriteTimeout: true
        )
    }

    /// Runs once every transfer is back after the end.
    private func teardown() {
        if let endpoint = self.state.withLock({ $0.haltedEndpoint }) {
            try? self.handle.clearHalt(endpoint: endpoint)
        }
        self.handle.releaseInterface(self.interface.interfaceNumber)
        let slots = self.state.withLock { state -> [TransferSlot] in
            let slots = state.slots
            state.slots = []
            // `completedInputs` stay: the channel delivers what came before the end.
            state.freeOutputs = []
            state.sink = nil
            return slots
        }
        for slot in slots { slot.bridge = nil }
    }
}
