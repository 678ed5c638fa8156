import AccessoryTransport

/// What ``USBBulkChannel`` needs from the transfers under it: ``USBLinkBridge`` (libusb), or a
/// test's own.
protocol USBTransferSource: AnyObject, Sendable {
    /// The completed IN transfers, in order, as many as carry at most `limit` bytes (at least
    /// one); each is the caller's until it calls ``resubmitInput(_:)`` for it.
    func takeCompletedInputs(upTo limit: Int) -> [TransferSlot]
    /// The OUT transfers that are free, in order; each is the caller's until it submits it.
    func takeFreeOutputs() -> [TransferSlot]
    /// Submits `slot` again to read.
    func resubmitInput(_ slot: TransferSlot)
    /// Submits `length` bytes of `slot` to write; `false` if they will not be sent (the link
    /// ended).
    func submitOutput(_ slot: TransferSlot, length: Int, moreBytesWaiting: Bool) -> Bool
    /// Ends the link; `nil`: an orderly close. Only the first call counts.
    func fail(_ reason: String?)
}

/// Transfers handed between the bridge (libusb's completions) and its channel's event loop.
/// Each take empties its list and allows the next announcement, so a batch that completes while
/// the channel works on the last one is announced once more and never lost.
extension USBLinkBridge: USBTransferSource {
    /// The completed IN transfers, in completion order, as many as carry at most `limit` bytes
    /// (at least one); none after the end began (the channel takes what completed before it,
    /// then the end). Those left are taken by the next call: the channel's next read.
    func takeCompletedInputs(upTo limit: Int) -> [TransferSlot] {
        self.state.withLock { state in
            let count = Self.readCount(of: state.completedInputs, upTo: limit)
            defer {
                state.completedInputs.removeFirst(count)
                state.inputsAnnounced = false
            }
            return Array(state.completedInputs.prefix(count))
        }
    }

    /// How many of `slots`, from the first, carry at most `limit` bytes together (at least one,
    /// if there is one): what one read takes.
    static func readCount(of slots: [TransferSlot], upTo limit: Int) -> Int {
        var count = 0
        var bytes = 0
        for slot in slots {
            bytes += Int(slot.transfer.pointee.actual_length)
            if count > 0 && bytes > limit { break }
            count += 1
        }
        return count
    }

    /// Every OUT transfer that is free, in the order they came back; none after the end began.
    func takeFreeOutputs() -> [TransferSlot] {
        self.state.withLock { state in
            defer {
                state.freeOutputs.removeAll(keepingCapacity: true)
                state.outputsAnnounced = false
            }
            return state.closing ? [] : state.freeOutputs
        }
    }

    /// Bytes in OUT transfers the device has not taken yet (submitted, not back).
    var outputBytesInFlight: Int { self.state.withLock { $0.outputBytesInFlight } }

    /// Submits `slot` again to read, or ends the link if libusb refuses.
    func resubmitInput(_ slot: TransferSlot) {
        guard let error = self.submit(slot, length: slot.capacity) else { return }
        self.fail(
            error == .noDevice
                ? "the USB device \(self.name) was disconnected (\(error.name))"
                : "could not read from \(self.name): \(error)"
        )
    }

    /// Submits `length` bytes of `slot` to write, or ends the link if libusb refuses; `false`
    /// then, or when the link has already ended (its bytes will not be sent).
    func submitOutput(_ slot: TransferSlot, length: Int, moreBytesWaiting: Bool) -> Bool {
        guard let error = self.submit(slot, length: length, moreBytesWaiting: moreBytesWaiting) else {
            return !self.state.withLock { $0.closing }
        }
        self.fail(
            error == .noDevice
                ? "the USB device \(self.name) was disconnected (\(error.name))"
                : "could not write to \(self.name): \(error)"
        )
        return false
    }
}
