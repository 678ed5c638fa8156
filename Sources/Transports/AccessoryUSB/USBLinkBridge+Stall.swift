import AccessoryTransport
import CLibUSB
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A halt the device set before the host's first request: cleared, and the same bytes sent
/// again (issue 18: a queued halt must not cost the user a failed command).
extension USBLinkBridge {
    /// Whether a stall of `slot` is one the bridge clears and carries on from: an OUT transfer
    /// stalled before the device took any byte of the link (a halt the device set before the
    /// host's first request). Nothing was sent, so sending the same bytes again is safe for any
    /// request; a stall later in an exchange stays an error, and so does a second halt.
    ///
    /// - Returns: nil if the stall is an error; otherwise whether this stall starts the clearing
    ///   (true) or joins one under way (false).
    static func carryOn(afterStallOf slot: TransferSlot, actualLength: Int, state: inout State) -> Bool? {
        // Only before the halt was cleared: a transfer sent again after the clearing that stalls
        // once more is the second halt, an error. (Joining the clearing then, as the check
        // `clearingHalt || haltsCleared == 0` let it while the resent batch was still going
        // out, left that transfer in `stalledOutputs` for good: its bytes never sent, and no
        // error until the HTTP idle timeout.)
        guard !slot.isInput, !state.closing, actualLength == 0, state.outputBytesSent == 0,
            state.haltsCleared == 0
        else { return nil }
        state.stalledOutputs.append(slot)
        if state.clearingHalt { return false }
        state.clearingHalt = true
        return true
    }

    /// Waits for the OUT transfers still in flight to come back (stalled too, while the endpoint
    /// is halted), clears the halt, and submits the stalled transfers and those held back, in
    /// their order; on a thread of its own, since a control transfer must not be waited for on
    /// libusb's event thread.
    func resendAfterClearingHalt() {
        let endpoint = self.interface.output.address
        let description = "endpoint 0x\(String(endpoint, radix: 16)) of \(self.name)"
        do {
            try DetachedThread.start {
                while self.state.withLock({ state in
                    !state.closing && state.slots.contains { !$0.isInput && $0.submitted }
                }) {
                    usleep(1000)
                }
                do {
                    try self.handle.clearHalt(endpoint: endpoint)
                } catch {
                    self.state.withLock { $0.haltedEndpoint = endpoint }
                    self.fail("\(description) stalled before the first request and clearing the halt failed: \(error)")
                    return
                }
                var batch: [(TransferSlot, Int)] = self.state.withLock { state in
                    state.haltsCleared += 1
                    defer {
                        state.stalledOutputs = []
                        state.heldOutputs = []
                    }
                    return state.stalledOutputs.map { ($0, Int($0.transfer.pointee.length)) } + state.heldOutputs
                }
                while !batch.isEmpty {
                    for (slot, length) in batch {
                        if let error = self.submit(slot, length: length, bypassingHold: true) {
                            self.fail("could not write to \(self.name) after clearing a stall: \(error)")
                            return
                        }
                    }
                    batch = self.state.withLock { state in
                        defer { state.heldOutputs = [] }
                        if state.heldOutputs.isEmpty { state.clearingHalt = false }
                        return state.heldOutputs
                    }
                }
            }
        } catch {
            self.state.withLock { $0.haltedEndpoint = endpoint }
            self.fail(
                "\(description) stalled before the first request; the halt was cleared and the link must be reopened"
            )
        }
    }
}
