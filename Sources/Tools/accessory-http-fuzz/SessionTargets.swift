import NIOCore

@testable import AccessorySession

/// The frame reader, strict and scanning, on a stream of good, damaged and cut-short frames in
/// reads of any size. Asserts that every frame it hands out is one that was on the wire, byte
/// for byte (never stitched together across reads or from two frames), and that it never holds
/// more than it was given.
enum SessionReaderTarget {
    static func run(_ input: inout FuzzInput) {
        let scanning = input.byte() & 1 == 1
        let splits = input.take(4)
        let stream = SessionStream.build(&input)
        var reader = SessionFrameReader()
        var given = 0
        for read in SessionStream.reads(of: stream, splits: splits) {
            given += read.readableBytes
            reader.append(read)
            while let frame = Self.next(&reader, scanning: scanning) {
                var encoded = ByteBuffer()
                frame.encode(into: &encoded)
                let bytes = Array(encoded.readableBytesView)
                FuzzCheck.require(Self.contains(stream, bytes), "the reader made a frame that was never sent: \(frame)")
            }
            FuzzCheck.require(reader.bufferedBytes <= given, "the reader holds more bytes than it was given")
        }
    }

    private static func next(_ reader: inout SessionFrameReader, scanning: Bool) -> SessionFrame? {
        if scanning { return reader.nextScanning() }
        switch reader.next() {
        case .frame(let frame): return frame
        case .needMoreBytes: return nil
        case .invalid:
            // A strict reader's owner ends the session here; go on as a hunting one would.
            reader.dropFirstByte()
            return reader.nextScanning()
        }
    }

    private static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        var start = 0
        while start + needle.count <= haystack.count {
            if haystack[start] == needle[0], haystack[start..<(start + needle.count)].elementsEqual(needle) {
                return true
            }
            start += 1
        }
        return false
    }
}

/// The responder's session machine (plain with a HELLO watch, session, hunting) fed a stream of
/// plain HTTP, frames and damage, with stalls, writes from the HTTP layer and stream ends in
/// between. Asserts that it never hands the HTTP layer more bytes than arrived, and that after
/// a well-formed HELLO it is in a session with that nonce, whatever came before.
enum SessionResponderTarget {
    static func run(_ input: inout FuzzInput) {
        let scenario = SessionStream.Scenario(&input)
        var machine = SessionResponderMachine()
        var received = 0
        var delivered = 0
        for (index, read) in scenario.reads.enumerated() {
            received += read.readableBytes
            delivered += Self.delivered(machine.received(read))
            switch scenario.event(index) % 8 {
            case 1: delivered += Self.delivered(machine.stalled())
            case 2: _ = machine.send(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
            case 3: _ = machine.endStream()
            default: break
            }
            FuzzCheck.require(delivered <= received, "delivered \(delivered) bytes of \(received) received")
        }
        // Whatever state it is in, a fresh HELLO (after a stall ends any partial frame) restarts it.
        _ = machine.stalled()
        let hello = SessionStream.encode(
            SessionFrame.Kind.hello.rawValue,
            nonce: 0x0A0B_0C0D_0E0F_1011,
            sequence: 0,
            payload: SessionFrame.handshakePayload(version: 1, maxFrame: SessionFrame.maxFrameSize)
        )
        _ = machine.received(ByteBuffer(bytes: hello))
        // A partial frame buffered ahead of the HELLO may claim it as payload; each stall (the
        // handler's timer) drops such a frame from its first byte, so the HELLO is found within
        // as many stalls as bytes are buffered.
        var stalls = 0
        while machine.mode != .session(nonce: 0x0A0B_0C0D_0E0F_1011) && machine.hasPartialInput && stalls <= received {
            _ = machine.stalled()
            stalls += 1
        }
        FuzzCheck.require(
            machine.mode == .session(nonce: 0x0A0B_0C0D_0E0F_1011),
            "a well-formed HELLO did not start a session after \(stalls) stalls (mode \(machine.mode))"
        )
    }

    private static func delivered(_ actions: [SessionResponderMachine.Action]) -> Int {
        actions.reduce(0) { total, action in
            if case .deliver(let bytes) = action { return total + bytes.readableBytes }
            return total
        }
    }
}

/// The opener's session machine: it sends HELLO with a known nonce and is fed what a device
/// might send back, with the clock moving and pings due. Asserts that it never delivers more
/// than arrived, never delivers before the handshake or after a failure, and fails at most once.
enum SessionOpenerTarget {
    static func run(_ input: inout FuzzInput) {
        let scenario = SessionStream.Scenario(&input)
        var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var machine = SessionOpenerMachine(nonce: SessionStream.nonce, now: now)
        _ = machine.start()
        var received = 0
        var delivered = 0
        var failed = false
        for (index, read) in scenario.reads.enumerated() {
            received += read.readableBytes
            let wasOpen = machine.state == .open
            var actions = machine.received(read, now: now)
            let event = scenario.event(index)
            now = now + .milliseconds(Int64(event % 16) * 100)
            switch event % 4 {
            case 1: actions += machine.tick(now: now, interval: .milliseconds(500))
            case 2: actions += machine.send(ByteBuffer(string: "GET / HTTP/1.1\r\n\r\n"))
            default: break
            }
            // Delivered bytes must come after the handshake: in an earlier read, or after the
            // `.established` of this one (a HELLO_ACK and DATA can share a read).
            var established = wasOpen
            for action in actions {
                switch action {
                case .established:
                    established = true
                case .deliver(let bytes):
                    FuzzCheck.require(!failed, "bytes delivered after the session failed")
                    FuzzCheck.require(established, "bytes delivered before the handshake")
                    delivered += bytes.readableBytes
                case .fail:
                    FuzzCheck.require(!failed, "the session failed twice")
                    failed = true
                default:
                    break
                }
            }
            FuzzCheck.require(delivered <= received, "delivered \(delivered) bytes of \(received) received")
        }
        _ = machine.close()
    }
}
