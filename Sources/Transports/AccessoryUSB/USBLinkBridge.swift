import AccessoryTransport
import CLibUSB
import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Carries bytes between a claimed interface's bulk endpoints and one end of a socketpair,
/// whose other end is the NIO channel the HTTP layer sees.
///
/// Threads: one runs libusb's event loop (and tears everything down at the end), one reads the
/// socket and submits OUT transfers (up to `transfersInFlight` at once), one writes completed IN
/// transfers to the socket in completion order and resubmits them (USBLinkBridge+Pumps.swift). Any failure (unplug, stall,
/// timeout) records a reason, cancels every transfer and shuts the socket down, so the HTTP
/// layer sees the stream end at once and reads the reason from the diagnostics.
final class USBLinkBridge: Sendable {
    struct State {
        var closing = false
        var failure: String?
        var inFlight = 0
        var completedInputs: [TransferSlot] = []
        var freeOutputs: [TransferSlot] = []
        var slots: [TransferSlot] = []
        var writerDone = false
        var deliveryDone = false
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
        var zeroLengthReads = 0
        /// The failure was an unspecific transfer error, which is also what an unplug looks like
        /// before libusb notices the device is gone.
        var failureMayBeUnplug = false
    }

    let handle: LibUSBDeviceHandle
    let interface: USBLinkInterface
    let policy: USBTransferPolicy
    let name: String
    /// The bridge's end of the socketpair; closed in teardown.
    let socket: CInt
    let state = TrackedMutex(State())
    let inputReady = DispatchSemaphore(value: 0)
    let outputFree = DispatchSemaphore(value: 0)
    /// Called once, when the interface has been released after the end (or the bridge never
    /// started its threads): what ``OpenedByteStream/waitUntilReleased()`` waits for, so that a
    /// reopen, another program or the process's exit finds the interface free.
    private let onReleased: @Sendable () -> Void

    init(
        handle: LibUSBDeviceHandle,
        interface: USBLinkInterface,
        policy: USBTransferPolicy,
        name: String,
        socket: CInt,
        onReleased: @escaping @Sendable () -> Void = {}
    ) {
        self.handle = handle
        self.interface = interface
        self.policy = policy
        self.name = name
        self.socket = socket
        self.onReleased = onReleased
    }

    /// Why the link ended, if it failed.
    var failure: String? { self.state.withLock { $0.failure } }

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

    /// Allocates the transfers, submits the reads and starts the threads.
    func start() throws(TransportError) {
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
                _ = close(self.socket)
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
        }
        for _ in outputs { self.outputFree.signal() }
        for input in inputs {
            if let error = self.submit(input, length: input.capacity) {
                self.fail("could not start reading from \(self.name): \(error)")
                break
            }
        }
        do {
            try DetachedThread.start { self.runEvents() }
        } catch {
            // No thread tears down: the interface is released here (its transfers and socket
            // stay allocated, as after the five-second give-up below).
            self.fail("could not start the USB threads: \(error)")
            self.handle.releaseInterface(self.interface.interfaceNumber)
            self.onReleased()
            throw TransportError(
                .openFailed,
                "could not start the USB threads for \(self.name): errno \(error.rawValue)"
            )
        }
        do {
            try DetachedThread.start { self.runWriter() }
            try DetachedThread.start { self.runDelivery() }
        } catch {
            // Without its threads the bridge cannot run; nothing was handed out yet.
            self.fail("could not start the USB threads: \(error)")
            throw TransportError(
                .openFailed,
                "could not start the USB threads for \(self.name): errno \(error.rawValue)"
            )
        }
    }

    // MARK: Submitting and completing

    /// Submits `slot` with `length` bytes; returns the libusb error if it was not submitted.
    /// `moreBytesWaiting`: for a write, whether the socket already holds the next one's bytes
    /// (then no zero-length packet follows it, ``USBTransferPolicy/needsZeroLengthPacket(afterWriting:maxPacketSize:moreBytesWaiting:)``).
    func submit(
        _ slot: TransferSlot,
        length: Int,
        moreBytesWaiting: Bool = false,
        bypassingHold: Bool = false
    ) -> LibUSBError? {
        let endpoint = slot.isInput ? self.interface.input.address : self.interface.output.address
        let timeout = slot.isInput ? 0 : self.policy.writeTimeoutMilliseconds
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
            slot.submitted = true
            return true
        }
        guard admitted else { return nil }
        let result = libusb_submit_transfer(slot.transfer)
        if result != 0 {
            self.state.withLock { state in
                state.inFlight -= 1
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
        case LIBUSB_TRANSFER_TIMED_OUT:
            problem =
                "\(direction) \(self.name) timed out after \(self.policy.writeTimeoutMilliseconds) ms (the device stopped reading)"
        case LIBUSB_TRANSFER_OVERFLOW:
            problem = "the device \(self.name) sent more than was asked for (LIBUSB_TRANSFER_OVERFLOW)"
        default:
            problem =
                "\(direction) \(self.name) failed (\(status == LIBUSB_TRANSFER_ERROR ? "LIBUSB_TRANSFER_ERROR" : "libusb transfer status \(status.rawValue)"))"
        }
        let actualLength = Int(slot.transfer.pointee.actual_length)
        // What follows the completion: a slot back to its thread, the link's end, or a stall
        // carried on from (the first of a clearing starts it; later ones join it).
        enum Next { case nothing, wake, fail, startClearing, joinClearing }
        let next: Next = self.state.withLock { state in
            state.inFlight -= 1
            slot.submitted = false
            if slot.isInput { state.inputBytesReceived += actualLength } else { state.outputBytesSent += actualLength }
            if halted != nil, let starts = Self.carryOn(afterStallOf: slot, actualLength: actualLength, state: &state) {
                return starts ? .startClearing : .joinClearing
            }
            if let halted { state.haltedEndpoint = halted }
            if status == LIBUSB_TRANSFER_ERROR && !state.closing { state.failureMayBeUnplug = true }
            if problem != nil { return .fail }
            guard !state.closing, status == LIBUSB_TRANSFER_COMPLETED else { return .nothing }
            if slot.isInput {
                state.completedInputs.append(slot)
            } else {
                state.freeOutputs.append(slot)
            }
            return .wake
        }
        switch next {
        case .startClearing: self.resendAfterClearingHalt()
        case .joinClearing, .nothing: break
        case .fail: self.fail(problem)
        case .wake: if slot.isInput { self.inputReady.signal() } else { self.outputFree.signal() }
        }
    }

    /// Ends the link: records `reason` (nil: an orderly close by the HTTP side), cancels every
    /// transfer and shuts the socket down. Only the first call counts.
    func fail(_ reason: String?) {
        let pending: [TransferSlot]? = self.state.withLock { state in
            guard !state.closing else { return nil }
            state.closing = true
            state.failure = reason
            return state.slots.filter(\.submitted)
        }
        guard let pending else { return }
        for slot in pending { _ = libusb_cancel_transfer(slot.transfer) }
        _ = shutdown(self.socket, CInt(SHUT_RDWR))
        self.inputReady.signal()
        for _ in 0...max(1, self.policy.transfersInFlight) { self.outputFree.signal() }
    }

    // MARK: Threads

    private func runEvents() {
        let clock = ContinuousClock()
        var closedAt: ContinuousClock.Instant?
        while true {
            _ = self.handle.device.context.handleEvents(milliseconds: 100)
            let (closing, inFlight, threadsDone) = self.state.withLock {
                ($0.closing, $0.inFlight, $0.writerDone && $0.deliveryDone)
            }
            guard closing else { continue }
            if inFlight == 0 && threadsDone { break }
            let started = closedAt ?? clock.now
            closedAt = started
            if clock.now - started > .seconds(5) {
                // Five seconds after the end a transfer has still not come back (or a thread has
                // not finished): release the interface, but leave the transfers, the socket and so
                // the handle allocated rather than free what libusb or a thread may still use.
                self.handle.releaseInterface(self.interface.interfaceNumber)
                self.onReleased()
                return
            }
        }
        self.teardown()
        self.onReleased()
    }

    /// Runs once every transfer is back and both bridge threads have finished.
    private func teardown() {
        if let endpoint = self.state.withLock({ $0.haltedEndpoint }) {
            try? self.handle.clearHalt(endpoint: endpoint)
        }
        self.handle.releaseInterface(self.interface.interfaceNumber)
        _ = close(self.socket)
        let slots = self.state.withLock { state -> [TransferSlot] in
            let slots = state.slots
            state.slots = []
            state.completedInputs = []
            state.freeOutputs = []
            return slots
        }
        for slot in slots { slot.bridge = nil }
    }
}
