import AccessoryTransport
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The reader thread: `ep2` → the current link. Bytes read in one generation never reach
/// another's link.
extension FunctionFSTransport {
    /// `ep2` → the current link, with up to ``Configuration/readsInFlight`` reads queued in the
    /// kernel through native AIO, so the endpoint has a request ready while this thread hands
    /// the last one's bytes to the link (with one blocking `read`, the host's next packets wait
    /// for that); the blocking reader where the kernel has no AIO.
    ///
    /// Reads are queued only while the function is enabled and carry the generation they were
    /// queued in; FunctionFS completes an endpoint's requests in order and fails those still
    /// queued when it disables the endpoint, so bytes that arrive belong to that generation.
    func runHostToDevice(_ output: CInt) {
        guard let aio = self.makeEndpointAIO(depth: self.configuration.readsInFlight, for: "reading ep2") else {
            self.runHostToDeviceBlocking(output)
            return
        }
        let size = self.configuration.readSize
        let buffers = UnsafeMutableRawPointer.allocate(byteCount: size * aio.depth, alignment: 4096)
        defer { buffers.deallocate() }
        // The generation each slot's read was queued in; nil: the slot is free.
        var queuedIn = [Int?](repeating: nil, count: aio.depth)
        while true {
            if self.state.withLock({ $0.enabled }) {
                let generation = self.generationToReadIn(output)
                for slot in queuedIn.indices where queuedIn[slot] == nil {
                    let buffer = buffers + slot * size
                    guard aio.submit(slot: slot, isWrite: false, descriptor: output, buffer: buffer, length: size) == 0
                    else { break }  // disabled under us (ESHUTDOWN): its completions say so
                    queuedIn[slot] = generation
                }
            }
            let anyQueued = queuedIn.contains { $0 != nil }
            var ready = pollfd(fd: aio.eventDescriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, anyQueued ? 100 : 1) > 0 else { continue }
            var shutDownIn: Int?
            for completion in aio.reap() {
                guard let generation = queuedIn[completion.slot] else { continue }
                queuedIn[completion.slot] = nil
                if completion.result > 0 {
                    self.deliver(buffers + completion.slot * size, count: completion.result, generation: generation)
                } else if completion.result < 0 {
                    // The endpoint was disabled under the read (ESHUTDOWN): by a host's open,
                    // which re-selects the interface, or by a disable or unbind.
                    shutDownIn = generation
                }
                // 0 bytes: a zero-length packet.
            }
            if let shutDownIn { self.waitForGenerationAfter(shutDownIn) }
        }
    }

    /// The reader where the kernel has no native AIO: one blocking `read` at a time.
    func runHostToDeviceBlocking(_ output: CInt) {
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: self.configuration.readSize, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            self.waitUntilEnabled()
            let generation = self.generationToReadIn(output)
            let count = read(output, buffer, self.configuration.readSize)
            if count < 0 {
                if errno == EINTR { continue }
                // The endpoint was disabled under the read (ESHUTDOWN): by a host's open, which
                // re-selects the interface (FunctionFS then reports only ENABLE), or by a
                // disable or unbind. Wait for the control thread to count that enable.
                self.waitForGenerationAfter(generation)
                continue
            }
            if count == 0 { continue }  // a zero-length packet
            self.deliver(buffer, count: count, generation: generation)
        }
    }

    /// The generation reads queued now belong to, taken while the function is enabled: a read
    /// queued before an enable returns the bytes of that enable's generation, and taking the
    /// number earlier dropped the first request of a fresh boot as stale (2 of 2 in one CI
    /// run). Halts the OUT endpoint first when that was asked for this generation.
    func generationToReadIn(_ output: CInt) -> Int {
        let (generation, haltNow) = self.state.withLock { state -> (Int, Bool) in
            guard let armedAt = state.outputHaltArmedAt, state.enabled, state.generation > armedAt else {
                return (state.generation, false)
            }
            state.outputHaltArmedAt = nil
            return (state.generation, true)
        }
        if haltNow { self.haltOutputEndpoint(output, generation: generation) }
        return generation
    }

    /// Hands `count` bytes read in `generation` to that generation's link, waiting for the
    /// responder to open it; drops them if a new host session began meanwhile (they are stale).
    func deliver(_ bytes: UnsafeRawPointer, count: Int, generation: Int) {
        var link: Link?
        while link == nil {
            let (current, stillSameGeneration) = self.state.withLock { state in
                (state.link?.generation == generation ? state.link : nil, state.generation == generation)
            }
            guard stillSameGeneration else { return }
            link = current
            if link == nil { usleep(1000) }
        }
        guard let link else { return }
        var offset = 0
        while offset < count {
            let sent = send(link.descriptor, bytes + offset, count - offset, CInt(MSG_NOSIGNAL))
            if sent < 0 && errno == EINTR { continue }
            if sent <= 0 { break }
            offset += sent
        }
        link.bytesIn.add(offset, ordering: .relaxed)
    }
}
