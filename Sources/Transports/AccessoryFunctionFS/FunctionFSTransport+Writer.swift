import AccessoryTransport
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The writer thread: the current link → `ep1`.
extension FunctionFSTransport {
    /// A write queued on `ep1`, in its AIO slot.
    struct QueuedWrite {
        let link: Link
        /// ``EndpointAIO/cancel(slot:)`` was asked for it: its failure is expected, not news.
        var cancelled = false
    }

    /// The current link → `ep1`, with up to ``Configuration/writesInFlight`` writes queued in the
    /// kernel through native AIO, as adbd does, so the endpoint always has the next request
    /// while this thread reads the following chunk; with the blocking writer where the kernel
    /// has no AIO. A zero-length packet follows a write that filled whole packets whenever the
    /// link has nothing more to send at once, so the host's transfer ends there.
    ///
    /// Writes of an abandoned generation (a disable, unbind or new enable since) are cancelled
    /// with `io_cancel`, and no byte read for one link is queued once another has replaced it.
    func runDeviceToHost(_ input: CInt) {
        guard let aio = self.makeEndpointAIO(depth: self.configuration.writesInFlight, for: "writing to ep1") else {
            self.runDeviceToHostBlocking(input)
            return
        }
        let size = self.configuration.writeSize
        let buffers = UnsafeMutableRawPointer.allocate(byteCount: size * aio.depth, alignment: 4096)
        defer { buffers.deallocate() }
        var queued = [QueuedWrite?](repeating: nil, count: aio.depth)
        var completionsReady = false
        // The link whose last queued write filled whole packets, with no zero-length packet yet.
        var zeroLengthPacketOwedTo: Link?

        func submitZeroLengthPacket(_ link: Link, slot: Int) {
            if aio.submit(slot: slot, isWrite: true, descriptor: input, buffer: buffers, length: 0) == 0 {
                queued[slot] = QueuedWrite(link: link)
            }
        }

        while true {
            if completionsReady {
                completionsReady = false
                for completion in aio.reap() { self.finish(completion, &queued) }
            }
            let (current, generation, enabled) = self.state.withLock { ($0.link, $0.generation, $0.enabled) }
            for slot in queued.indices {
                guard let write = queued[slot], !write.cancelled, !enabled || write.link.generation != generation
                else { continue }
                queued[slot]?.cancelled = true
                if !aio.cancel(slot: slot) { queued[slot] = nil }
            }
            guard let link = current, link.generation == generation, enabled else {
                zeroLengthPacketOwedTo = nil
                completionsReady = self.waitForWriterEvents(aio, socket: nil, milliseconds: 2).completions
                continue
            }
            guard let slot = queued.firstIndex(where: { $0 == nil }) else {
                completionsReady = self.waitForWriterEvents(aio, socket: nil, milliseconds: 100).completions
                continue
            }
            let owed = zeroLengthPacketOwedTo === link
            let events = self.waitForWriterEvents(aio, socket: link.descriptor, milliseconds: owed ? 0 : 100)
            completionsReady = events.completions
            guard events.readable else {
                if owed {
                    submitZeroLengthPacket(link, slot: slot)
                    zeroLengthPacketOwedTo = nil
                }
                continue
            }
            let buffer = buffers + slot * size
            let count = read(link.descriptor, buffer, size)
            if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            if count <= 0 {
                if owed { submitZeroLengthPacket(link, slot: slot) }
                zeroLengthPacketOwedTo = nil
                self.end(link, because: "the responder closed it")
                continue
            }
            // Bytes read for a link that has ended since are the abandoned generation's.
            guard self.state.withLock({ $0.link === link && $0.generation == link.generation }) else { continue }
            let refused = aio.submit(slot: slot, isWrite: true, descriptor: input, buffer: buffer, length: count)
            if refused != 0 {
                self.end(link, because: "writing to the host failed (\(String(cString: strerror(refused))))")
                continue
            }
            queued[slot] = QueuedWrite(link: link)
            let packet = self.state.withLock { $0.maxPacketSize }
            zeroLengthPacketOwedTo =
                self.configuration.zeroLengthPackets
                    && functionFSNeedsZeroLengthPacket(afterWriting: count, maxPacketSize: packet) ? link : nil
        }
    }

    /// A write has completed: count its bytes, or end its link if it failed unasked.
    func finish(_ completion: EndpointAIO.Completion, _ queued: inout [QueuedWrite?]) {
        guard let write = queued[completion.slot] else { return }
        queued[completion.slot] = nil
        if completion.result >= 0 {
            write.link.bytesOut.add(completion.result, ordering: .relaxed)
        } else if !write.cancelled {
            let reason = String(cString: strerror(CInt(-completion.result)))
            self.end(write.link, because: "writing to the host failed (\(reason))")
        }
    }

    /// Waits up to `milliseconds` for a write to complete or `socket` to have bytes (or end).
    func waitForWriterEvents(
        _ aio: EndpointAIO,
        socket: CInt?,
        milliseconds: CInt
    ) -> (completions: Bool, readable: Bool) {
        var descriptors = [pollfd(fd: aio.eventDescriptor, events: Int16(POLLIN), revents: 0)]
        if let socket { descriptors.append(pollfd(fd: socket, events: Int16(POLLIN), revents: 0)) }
        let ready = poll(&descriptors, nfds_t(descriptors.count), milliseconds)
        guard ready > 0 else { return (false, false) }
        let readable = descriptors.count > 1 && descriptors[1].revents != 0
        return (descriptors[0].revents != 0, readable)
    }

    /// The writer where the kernel has no native AIO: one blocking `write` at a time, freed only
    /// when the endpoint is disabled.
    func runDeviceToHostBlocking(_ input: CInt) {
        let size = self.configuration.writeSize
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: size)
        defer { buffer.deallocate() }
        while true {
            guard let link = self.state.withLock({ $0.link }) else {
                usleep(2000)
                continue
            }
            let count = read(link.descriptor, buffer, size)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 {
                self.end(link, because: "the responder closed it")
                continue
            }
            // Bytes read for a link that has ended since (a new enable, a disable, an unbind) are
            // the abandoned generation's: a new host must never receive them. Checked before
            // each write; a write already under way when the endpoint is disabled fails.
            guard self.state.withLock({ $0.link === link && $0.generation == link.generation }) else { continue }
            var offset = 0
            var failure: CInt?
            while offset < count {
                if offset > 0, !self.state.withLock({ $0.link === link }) { break }
                let written = write(input, buffer + offset, count - offset)
                if written < 0 && errno == EINTR { continue }
                if written < 0 {
                    failure = errno
                    break
                }
                offset += written
            }
            link.bytesOut.add(offset, ordering: .relaxed)
            if let failure {
                self.end(link, because: "writing to the host failed (\(String(cString: strerror(failure))))")
                continue
            }
            let packet = self.state.withLock { $0.maxPacketSize }
            if self.configuration.zeroLengthPackets
                && functionFSNeedsZeroLengthPacket(afterWriting: count, maxPacketSize: packet)
            {
                _ = write(input, buffer, 0)
            }
        }
    }
}
