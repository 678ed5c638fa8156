import AccessoryTransport
import CLibUSB

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The bridge's two pumps between the socket and the transfers. Each takes every slot that is
/// ready when it wakes and moves their bytes with one system call (`readv`, `sendmsg`): under
/// load several transfers complete between two wake-ups, and a call and a wake-up per 16 KiB
/// transfer was what the pumps cost.
extension USBLinkBridge {
    /// Socket → OUT transfers.
    func runWriter() {
        defer { self.state.withLock { $0.writerDone = true } }
        while true {
            self.outputFree.wait()
            // Every free slot, in the order they came back; one signal was consumed for all of
            // them, so later waits may find none (and go round again): never fewer signals
            // than free slots, so no wake-up is lost.
            guard
                let slots = self.state.withLock({ state -> [TransferSlot]? in
                    guard !state.closing else { return nil }
                    defer { state.freeOutputs.removeAll(keepingCapacity: true) }
                    return state.freeOutputs
                })
            else { return }
            if slots.isEmpty { continue }
            let count = Self.readFilling(self.socket, slots)
            if count == 0 {
                self.fail(nil)  // the HTTP side closed the stream
                return
            }
            if count < 0 {
                let reason = String(cString: strerror(errno))
                self.fail(
                    self.state.withLock { $0.closing } ? nil : "reading the socket of \(self.name) failed: \(reason)"
                )
                return
            }
            // The read filled the slots in order: every one before the last it reached is full.
            var left = count
            var used = 0
            while used < slots.count && left > 0 {
                let slot = slots[used]
                let length = min(left, slot.capacity)
                left -= length
                used += 1
                // A full slot with more of the read behind it is continued at once: no ZLP.
                // Only the read's last write that would end in one asks whether more bytes wait
                // (an ioctl): for any other, the answer changes nothing.
                let more =
                    left > 0
                    || (self.policy.needsZeroLengthPacket(
                        afterWriting: length,
                        maxPacketSize: self.interface.output.maxPacketSize
                    ) && self.socketHasBytes())
                if let error = self.submit(slot, length: length, moreBytesWaiting: more) {
                    self.fail(
                        error == .noDevice
                            ? "the USB device \(self.name) was disconnected (\(error.name))"
                            : "could not write to \(self.name): \(error)"
                    )
                    return
                }
            }
            if used < slots.count {
                // Slots the read did not reach are free again; the signals consumed for them
                // are still owed (one was taken for the whole batch), so none is given back.
                let unused = slots[used...]
                self.state.withLock { $0.freeOutputs.insert(contentsOf: unused, at: 0) }
            }
        }
    }

    /// Reads what the socket holds into `slots`, in order, with one `readv`; the byte count,
    /// 0 at the end of the stream, or -1 with `errno` set.
    private static func readFilling(_ socket: CInt, _ slots: [TransferSlot]) -> Int {
        var vectors = slots.map { iovec(iov_base: UnsafeMutableRawPointer($0.buffer), iov_len: $0.capacity) }
        var count: Int
        repeat {
            count = vectors.withUnsafeMutableBufferPointer { readv(socket, $0.baseAddress, CInt($0.count)) }
        } while count < 0 && errno == EINTR
        return count
    }

    /// Whether the HTTP side has written bytes the writer has not read yet.
    private func socketHasBytes() -> Bool {
        var waiting: CInt = 0
        return ioctl(self.socket, UInt(FIONREAD), &waiting) == 0 && waiting > 0
    }

    /// IN transfers → socket, in completion order.
    func runDelivery() {
        defer { self.state.withLock { $0.deliveryDone = true } }
        while true {
            self.inputReady.wait()
            // Every completed read, in completion order (as for the writer, a later wait may
            // find none).
            guard
                let slots = self.state.withLock({ state -> [TransferSlot]? in
                    guard !state.closing else { return nil }
                    defer { state.completedInputs.removeAll(keepingCapacity: true) }
                    return state.completedInputs
                })
            else { return }
            if slots.isEmpty { continue }
            guard self.deliver(slots) else {
                self.fail(nil)  // the HTTP side is gone
                return
            }
            for slot in slots {
                if let error = self.submit(slot, length: slot.capacity) {
                    self.fail(
                        error == .noDevice
                            ? "the USB device \(self.name) was disconnected (\(error.name))"
                            : "could not read from \(self.name): \(error)"
                    )
                    return
                }
            }
        }
    }

    /// Sends the bytes of `slots` to the socket, runs of reads that carried bytes with one
    /// `sendmsg` each; a 0-byte read (a ZLP that ended a transfer, or a device with nothing to
    /// say) between them counts towards the poll's back-off. `false` if the socket is gone.
    private func deliver(_ slots: [TransferSlot]) -> Bool {
        var run: [iovec] = []
        for slot in slots {
            let length = Int(slot.transfer.pointee.actual_length)
            if length > 0 {
                run.append(iovec(iov_base: UnsafeMutableRawPointer(slot.buffer), iov_len: length))
                continue
            }
            // Bytes before this 0-byte read end the run of 0-byte reads before them.
            let afterBytes = !run.isEmpty
            guard Self.sendAll(self.socket, &run) else { return false }
            let consecutive = self.state.withLock { state -> Int in
                if afterBytes { state.zeroLengthReads = 0 }
                state.zeroLengthReads += 1
                return state.zeroLengthReads
            }
            let delay = USBTransferPolicy.zeroLengthReadDelay(consecutive: consecutive)
            if delay > 0 { usleep(UInt32(delay) * 1000) }
        }
        guard !run.isEmpty else { return true }
        self.state.withLock { $0.zeroLengthReads = 0 }
        return Self.sendAll(self.socket, &run)
    }

    /// Sends every byte `vectors` point at to `socket` (emptying it), resuming after short
    /// sends; `false` if the socket is gone.
    static func sendAll(_ socket: CInt, _ vectors: inout [iovec]) -> Bool {
        Self.sendAll(&vectors) { first, count in
            var message = msghdr()
            message.msg_iov = first
            message.msg_iovlen = count
            return sendmsg(socket, &message, CInt(MSG_NOSIGNAL))
        }
    }

    /// Sends every byte `vectors` point at through `send` (`sendmsg` on the first `count`
    /// vectors from a pointer, returning the bytes taken or -1 with `errno`), emptying it and
    /// resuming after short sends; `false` if a send took nothing.
    static func sendAll(
        _ vectors: inout [iovec],
        through send: (_ first: UnsafeMutablePointer<iovec>, _ count: Int) -> Int
    ) -> Bool {
        var first = 0
        while first < vectors.count {
            let sent = vectors.withUnsafeMutableBufferPointer { buffer -> Int in
                guard let base = buffer.baseAddress else { return 0 }
                return send(base + first, buffer.count - first)
            }
            if sent < 0 && errno == EINTR { continue }
            if sent <= 0 { return false }
            // Skip what went; the first vector not wholly sent starts where the send stopped.
            var left = sent
            while first < vectors.count && left >= vectors[first].iov_len {
                left -= vectors[first].iov_len
                first += 1
            }
            if left > 0 {
                vectors[first].iov_base = vectors[first].iov_base.map { $0 + left }
                vectors[first].iov_len -= left
            }
        }
        vectors.removeAll(keepingCapacity: true)
        return true
    }
}
