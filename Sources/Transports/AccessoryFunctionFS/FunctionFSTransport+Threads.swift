import AccessoryTransport
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The three threads of a FunctionFS function: `ep0` events, `ep2` to the link, the link to `ep1`.
extension FunctionFSTransport {
    // MARK: Threads

    func end(_ link: Link, because reason: String) {
        if link.end() { self.logEnd(link, reason) }
        self.state.withLock { state in
            if state.link === link { state.link = nil }
        }
    }

    func endCurrentLink(_ state: inout State, because reason: String) {
        if let link = state.link, link.end() { self.logEnd(link, reason) }
        state.link = nil
    }

    func logEnd(_ link: Link, _ reason: String) {
        self.logger.info(
            "link ended: \(reason)",
            metadata: [
                "generation": "\(link.generation)",
                "bytes-in": "\(link.bytesIn.load(ordering: .relaxed))",
                "bytes-out": "\(link.bytesOut.load(ordering: .relaxed))",
            ]
        )
    }

    /// `ep0` events: enable starts a new generation (and ends the link), disable and unbind end it.
    func runControl(_ control: CInt) {
        var buffer = [UInt8](repeating: 0, count: FunctionFSEvent.size * 4)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(control, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 {
                self.logger.error("reading \(self.directory)/ep0 failed; no more events")
                return
            }
            for event in FunctionFSEvent.decode(buffer[0..<count]) {
                switch event.kind {
                case .enable:
                    let packet = self.currentMaxPacketSize()
                    let generation = self.state.withLock { state in
                        state.enabled = true
                        state.generation += 1
                        state.maxPacketSize = packet
                        state.lastEvent = "enable"
                        self.endCurrentLink(&state, because: "the host enabled the function again")
                        return state.generation
                    }
                    self.logger.info(
                        "enabled by the host",
                        metadata: ["generation": "\(generation)", "max-packet": "\(packet)"]
                    )
                case .disable, .unbind:
                    let name = event.kind == .disable ? "disable" : "unbind"
                    self.state.withLock { state in
                        state.enabled = false
                        state.lastEvent = name
                        self.endCurrentLink(&state, because: "the host sent \(name)")
                    }
                    self.logger.info("\(name) from the host")
                case .setup:
                    // No control requests are defined for this function: stall them.
                    var none: UInt8 = 0
                    if event.requestType & 0x80 != 0 {
                        _ = read(control, &none, 0)
                    } else {
                        _ = write(control, &none, 0)
                    }
                case .bind, .suspend, .resume, .none:
                    let name = event.kind.map { "\($0)" } ?? "unknown"
                    self.state.withLock { $0.lastEvent = name }
                    self.logger.info("\(name) from the host")
                }
            }
        }
    }

    /// The IN endpoint's packet size at the current speed (`FUNCTIONFS_ENDPOINT_DESC`).
    func currentMaxPacketSize() -> Int {
        let input = self.state.withLock { $0.input }
        var descriptor = [UInt8](repeating: 0, count: 9)
        let request: UInt = 0x8009_6782  // _IOR('g', 130, struct usb_endpoint_descriptor) (9 bytes)
        let result = descriptor.withUnsafeMutableBytes { bytes -> CInt in
            guard let base = bytes.baseAddress else { return -1 }
            return ioctl(input, request, base)
        }
        guard result >= 0 else { return 512 }
        let size = Int(descriptor[4]) | (Int(descriptor[5] & 0x07) << 8)
        return size > 0 ? size : 512
    }

    /// `ep2` → the current link. Bytes read in one generation never reach another's link.
    func runHostToDevice(_ output: CInt) {
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: self.configuration.readSize)
        defer { buffer.deallocate() }
        while true {
            // The generation is taken only while the function is enabled: a read queued before
            // an enable returns the bytes of that enable's generation, and taking the number
            // earlier dropped the first request of a fresh boot as stale (2 of 2 in one CI run).
            self.waitUntilEnabled()
            let (generation, haltNow) = self.state.withLock { state -> (Int, Bool) in
                guard let armedAt = state.outputHaltArmedAt, state.enabled, state.generation > armedAt else {
                    return (state.generation, false)
                }
                state.outputHaltArmedAt = nil
                return (state.generation, true)
            }
            if haltNow { self.haltOutputEndpoint(output, generation: generation) }
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
            var link: Link?
            while link == nil {
                let (current, stillSameGeneration) = self.state.withLock { state in
                    (state.link?.generation == generation ? state.link : nil, state.generation == generation)
                }
                guard stillSameGeneration else { break }
                link = current
                if link == nil { usleep(1000) }
            }
            guard let link else { continue }  // a new host session began: the bytes are stale
            var offset = 0
            while offset < count {
                let sent = send(link.descriptor, buffer + offset, count - offset, CInt(MSG_NOSIGNAL))
                if sent < 0 && errno == EINTR { continue }
                if sent <= 0 { break }
                offset += sent
            }
            link.bytesIn.add(offset, ordering: .relaxed)
        }
    }

    /// Up to 100 ms for the control thread to see the host enable the function again.
    func waitForGenerationAfter(_ generation: Int) {
        for _ in 0..<100 {
            if self.state.withLock({ $0.enabled && $0.generation != generation }) { return }
            usleep(1000)
        }
    }

    /// Until the host has enabled the function (polled: FunctionFS gives no other signal here).
    func waitUntilEnabled() {
        while !self.state.withLock({ $0.enabled }) { usleep(1000) }
    }

    func haltOutputEndpoint(_ output: CInt, generation: Int) {
        var byte: UInt8 = 0
        // A write to an OUT endpoint halts it (FunctionFS answers EBADMSG).
        let halted = write(output, &byte, 1) < 0 && errno == EBADMSG
        self.logger.info(
            halted
                ? "halted the bulk OUT endpoint before the link's first byte, as asked"
                : "could not halt the bulk OUT endpoint (\(String(cString: strerror(errno))))",
            metadata: ["generation": "\(generation)"]
        )
    }

    /// The current link → `ep1`, with a zero-length packet after writes of whole packets.
    func runDeviceToHost(_ input: CInt) {
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
