import AccessoryTransport
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The control thread of a FunctionFS function (`ep0` events), and what the reader
/// (FunctionFSTransport+Reader.swift) and the writer (+Writer.swift) share.
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

    /// Native AIO for `depth` transfers, or nil for one blocking transfer at a time: when
    /// `depth` is 1 or less, or the kernel has no AIO (logged as a warning naming `purpose`).
    func makeEndpointAIO(depth: Int, for purpose: String) -> EndpointAIO? {
        guard depth > 1 else { return nil }
        var failure: CInt = 0
        if let aio = EndpointAIO(depth: depth, failure: &failure) { return aio }
        self.logger.warning(
            "no native AIO in this kernel (\(String(cString: strerror(failure)))): \(purpose) one request at a time"
        )
        return nil
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
}
