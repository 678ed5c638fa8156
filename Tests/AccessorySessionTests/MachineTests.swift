import NIOCore
import Testing

@testable import AccessorySession

/// The two state machines, driven byte by byte without I/O: bad input gets a named error and a
/// restart, never a crash or a wrong delivery.
@Suite("session machines")
struct MachineTests {
    static func frame(
        _ kind: SessionFrame.Kind,
        nonce: UInt64,
        sequence: UInt32,
        _ payload: ByteBuffer = ByteBuffer()
    ) -> ByteBuffer {
        var out = ByteBuffer()
        SessionFrame(kind, nonce: nonce, sequence: sequence, payload: payload).encode(into: &out)
        return out
    }

    static func hello(_ nonce: UInt64) -> ByteBuffer {
        frame(.hello, nonce: nonce, sequence: 0, SessionFrame.handshakePayload(version: 1, maxFrame: 16384))
    }

    static func ack(_ nonce: UInt64) -> ByteBuffer {
        frame(.helloAck, nonce: nonce, sequence: 0, SessionFrame.handshakePayload(version: 1, maxFrame: 16384))
    }

    /// What the responder's actions add up to.
    struct Outcome {
        var delivered = ByteBuffer()
        var written = ByteBuffer()
        var abandons: [SessionResponderMachine.Abandon] = []
    }

    static func feed(_ machine: inout SessionResponderMachine, _ bytes: ByteBuffer, oneByteAtATime: Bool = false)
        -> Outcome
    {
        var outcome = Outcome()
        let pieces: [ByteBuffer] =
            oneByteAtATime ? bytes.readableBytesView.map { ByteBuffer(bytes: [$0]) } : [bytes]
        for piece in pieces {
            for action in machine.received(piece) {
                switch action {
                case .deliver(var bytes): outcome.delivered.writeBuffer(&bytes)
                case .write(var bytes): outcome.written.writeBuffer(&bytes)
                case .abandon(let why): outcome.abandons.append(why)
                case .trace: break
                }
            }
        }
        return outcome
    }

    static func frames(in bytes: ByteBuffer) -> [SessionFrame] {
        var reader = SessionFrameReader()
        reader.append(bytes)
        var frames: [SessionFrame] = []
        while case .frame(let frame) = reader.next() { frames.append(frame) }
        return frames
    }

    @Test("plain bytes pass; a HELLO split into 1-byte reads starts a session; DATA flows")
    func plainThenSession() {
        var machine = SessionResponderMachine()
        var input = ByteBuffer(string: "GET / HTTP/1.1\r\n\r\n")
        input.writeImmutableBuffer(Self.hello(42))
        input.writeImmutableBuffer(Self.frame(.data, nonce: 42, sequence: 1, ByteBuffer(string: "GET /status")))
        let outcome = Self.feed(&machine, input, oneByteAtATime: true)
        #expect(String(buffer: outcome.delivered) == "GET / HTTP/1.1\r\n\r\nGET /status")
        #expect(outcome.abandons == [.restart])
        let sent = Self.frames(in: outcome.written)
        #expect(sent.map(\.kind) == [.helloAck] && sent.first?.nonce == 42)
        #expect(machine.mode == .session(nonce: 42))
    }

    @Test(
        "damage inside a session: CLOSE 02, then the HELLO right behind it is found",
        arguments: ["bad CRC", "oversized length", "unknown type", "sequence gap", "cut short"]
    )
    func damageThenHello(kind: String) {
        var machine = SessionResponderMachine()
        _ = Self.feed(&machine, Self.hello(1))
        var bad = Self.frame(.data, nonce: 1, sequence: 1, ByteBuffer(string: "payload"))
        switch kind {
        case "bad CRC": bad.setInteger(UInt8(0x21), at: bad.writerIndex - 6)
        case "oversized length":
            bad = ByteBuffer(
                bytes: SessionFrame.magic + [1, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0x7F, 0, 0, 0]
            )
            let crc = bad.withUnsafeReadableBytes { CRC32C.checksum($0) }
            bad.writeInteger(crc)
        case "unknown type": bad = Self.frame(.data, nonce: 1, sequence: 1); bad.setInteger(UInt8(9), at: 5)
        case "sequence gap": bad = Self.frame(.data, nonce: 1, sequence: 2, ByteBuffer(string: "x"))
        default:
            let long = Self.frame(.data, nonce: 1, sequence: 1, ByteBuffer(repeating: 7, count: 1000))
            bad = long.getSlice(at: 0, length: 40) ?? ByteBuffer()
        }
        var input = bad
        input.writeImmutableBuffer(Self.hello(2))
        var outcome = Self.feed(&machine, input)
        if kind == "cut short" {
            // The cut frame swallowed the HELLO's first bytes; only the stall rule gives it up.
            #expect(outcome.abandons.isEmpty)
            for action in machine.stalled() {
                if case .write(var bytes) = action { outcome.written.writeBuffer(&bytes) }
                if case .abandon(let why) = action { outcome.abandons.append(why) }
            }
        }
        let sent = Self.frames(in: outcome.written)
        #expect(
            sent.first?.kind == .close
                && sent.first?.payload.getInteger(at: sent.first!.payload.readerIndex, as: UInt8.self) == 2
        )
        #expect(sent.last?.kind == .helloAck && sent.last?.nonce == 2, "\(kind): \(sent)")
        #expect(machine.mode == .session(nonce: 2), "\(kind)")
        #expect(outcome.delivered.readableBytes == 0, "\(kind): damaged bytes must never be delivered")
    }

    @Test("a flood of 1000 HELLOs ends in the session of the last")
    func helloFlood() {
        var machine = SessionResponderMachine()
        var input = ByteBuffer()
        for nonce in 1...1000 { input.writeImmutableBuffer(Self.hello(UInt64(nonce))) }
        let outcome = Self.feed(&machine, input)
        #expect(outcome.abandons.count == 1000)
        #expect(Self.frames(in: outcome.written).last?.nonce == 1000)
        #expect(machine.mode == .session(nonce: 1000))
    }

    @Test("plain mode: a PING of an ended session is dropped; a body ending in AC is released on stall")
    func plainEdges() {
        var machine = SessionResponderMachine()
        var input = ByteBuffer(string: "abc")
        input.writeImmutableBuffer(Self.frame(.ping, nonce: 5, sequence: 9))
        input.writeBytes([0x64, 0xAC])
        var outcome = Self.feed(&machine, input)
        #expect(Array(outcome.delivered.readableBytesView) == Array("abcd".utf8))
        for action in machine.stalled() {
            if case .deliver(var bytes) = action { outcome.delivered.writeBuffer(&bytes) }
        }
        #expect(Array(outcome.delivered.readableBytesView) == Array("abcd".utf8) + [0xAC])
    }

    /// A responder going away (a graceful shutdown began) answers no HELLO: neither in a
    /// session nor in plain mode, nor one split into single bytes; what follows it is dropped.
    @Test("after refuseNewSessions a HELLO is refused, not answered", arguments: [false, true])
    func refusedHello(oneByteAtATime: Bool) {
        var inSession = SessionResponderMachine()
        _ = Self.feed(&inSession, Self.hello(3))
        inSession.refuseNewSessions()
        var input = Self.frame(.data, nonce: 3, sequence: 1, ByteBuffer(string: "GET / HTTP/1.1\r\n\r\n"))
        input.writeImmutableBuffer(Self.hello(4))
        input.writeImmutableBuffer(Self.frame(.data, nonce: 4, sequence: 1, ByteBuffer(string: "GET /next")))
        let outcome = Self.feed(&inSession, input, oneByteAtATime: oneByteAtATime)
        #expect(String(buffer: outcome.delivered) == "GET / HTTP/1.1\r\n\r\n")
        #expect(outcome.abandons == [.refused])
        #expect(outcome.written.readableBytes == 0, "no HELLO_ACK")
        #expect(inSession.mode == .hunting)

        var plain = SessionResponderMachine()
        plain.refuseNewSessions()
        var plainInput = ByteBuffer(string: "GET /a HTTP/1.1\r\n\r\n")
        plainInput.writeImmutableBuffer(Self.hello(5))
        plainInput.writeString("GET /b HTTP/1.1\r\n\r\n")
        let plainOutcome = Self.feed(&plain, plainInput, oneByteAtATime: oneByteAtATime)
        #expect(String(buffer: plainOutcome.delivered) == "GET /a HTTP/1.1\r\n\r\n")
        #expect(plainOutcome.abandons == [.refused])
        #expect(plainOutcome.written.readableBytes == 0, "no HELLO_ACK")
    }

    @Test("the host's CLOSE returns to plain mode; the bytes after it are plain")
    func closeReturnsToPlain() {
        var machine = SessionResponderMachine()
        var input = Self.hello(3)
        input.writeImmutableBuffer(Self.frame(.close, nonce: 3, sequence: 1, SessionFrame.closePayload(.endOfStream)))
        input.writeString("GET /x HTTP/1.1\r\n\r\n")
        let outcome = Self.feed(&machine, input)
        #expect(outcome.abandons == [.restart, .closedByHost])
        #expect(String(buffer: outcome.delivered) == "GET /x HTTP/1.1\r\n\r\n")
        #expect(machine.mode == .plain)
    }

    /// The responder ends a session itself (its HTTP layer answered an upload early and closes)
    /// in the middle of a DATA frame: the rest of that frame and the frames behind it, which the
    /// host sent before it saw the CLOSE, are dropped, not read as a plain request; the first
    /// plain bytes after them are plain, and a HELLO after them starts the next session. Fed
    /// whole and in 1-byte reads.
    @Test(
        "after its own CLOSE the responder drops the ended session's frames still arriving",
        arguments: [false, true]
    )
    func ownCloseDropsTheEndedSessionsFrames(oneByteAtATime: Bool) {
        for next in ["plain", "hello"] {
            var machine = SessionResponderMachine()
            var start = Self.hello(7)
            let upload = Self.frame(.data, nonce: 7, sequence: 1, ByteBuffer(repeating: 0x41, count: 600))
            start.writeImmutableBuffer(upload.getSlice(at: upload.readerIndex, length: 100) ?? ByteBuffer())
            _ = Self.feed(&machine, start, oneByteAtATime: oneByteAtATime)
            let close = machine.endStream() ?? []
            #expect(
                Self.frames(
                    in: close.reduce(into: ByteBuffer()) { out, action in
                        if case .write(var bytes) = action { out.writeBuffer(&bytes) }
                    }
                ).map(\.kind) == [.close]
            )
            var rest = upload.getSlice(at: upload.readerIndex + 100, length: upload.readableBytes - 100) ?? ByteBuffer()
            rest.writeImmutableBuffer(Self.frame(.data, nonce: 7, sequence: 2, ByteBuffer(repeating: 0x42, count: 300)))
            rest.writeImmutableBuffer(Self.frame(.ping, nonce: 7, sequence: 3, ByteBuffer(integer: UInt64(1))))
            if next == "plain" {
                rest.writeString("GET /next HTTP/1.1\r\n\r\n")
            } else {
                rest.writeImmutableBuffer(Self.hello(8))
                rest.writeImmutableBuffer(Self.frame(.data, nonce: 8, sequence: 1, ByteBuffer(string: "GET /s")))
            }
            let outcome = Self.feed(&machine, rest, oneByteAtATime: oneByteAtATime)
            if next == "plain" {
                #expect(String(buffer: outcome.delivered) == "GET /next HTTP/1.1\r\n\r\n", "\(next) \(oneByteAtATime)")
                #expect(machine.mode == .plain)
            } else {
                #expect(String(buffer: outcome.delivered) == "GET /s", "\(next) \(oneByteAtATime)")
                #expect(outcome.abandons == [.restart])
                #expect(machine.mode == .session(nonce: 8))
            }
            #expect(Self.frames(in: outcome.written).allSatisfy { $0.kind == .helloAck }, "no PONG for a dead session")
        }
    }

    // MARK: Opener

    static func open(_ machine: inout SessionOpenerMachine, after garbage: ByteBuffer) -> Bool {
        _ = machine.start()
        var input = garbage
        input.writeImmutableBuffer(Self.ack(machine.nonce))
        return machine.received(input, now: .now()).contains { if case .established = $0 { true } else { false } }
    }

    @Test("the opener drops everything before its HELLO_ACK, a frame cut short included")
    func openerHandshake() {
        var machine = SessionOpenerMachine(nonce: 77, now: .now())
        var garbage = ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 9999\r\n\r\nxxxxxxxx")
        garbage.writeImmutableBuffer(Self.frame(.data, nonce: 76, sequence: 5, ByteBuffer(repeating: 1, count: 100)))
        let cut = Self.frame(.data, nonce: 76, sequence: 6, ByteBuffer(repeating: 2, count: 1000))
        garbage.writeImmutableBuffer(cut.getSlice(at: 0, length: 40)!)
        #expect(Self.open(&machine, after: garbage))
        let data = machine.received(Self.frame(.data, nonce: 77, sequence: 1, ByteBuffer(string: "ok")), now: .now())
        #expect(data.contains { if case .deliver(let bytes) = $0 { String(buffer: bytes) == "ok" } else { false } })
    }

    @Test(
        "in a session the opener fails with a named code",
        arguments: [
            ("bad CRC", SessionError.Code.integrity), ("sequence gap", .integrity), ("foreign nonce", .sessionLost),
            ("CLOSE 02", .closedByDevice), ("HELLO", .protocolViolation),
        ]
    )
    func openerFailures(kind: String, code: SessionError.Code) {
        var machine = SessionOpenerMachine(nonce: 9, now: .now())
        #expect(Self.open(&machine, after: ByteBuffer()))
        var input: ByteBuffer
        switch kind {
        case "bad CRC":
            input = Self.frame(.data, nonce: 9, sequence: 1, ByteBuffer(string: "abc"))
            input.setInteger(UInt8(0), at: input.writerIndex - 5)
        case "sequence gap": input = Self.frame(.data, nonce: 9, sequence: 2)
        case "foreign nonce": input = Self.frame(.data, nonce: 10, sequence: 1)
        case "CLOSE 02": input = Self.frame(.close, nonce: 9, sequence: 1, SessionFrame.closePayload(.integrityError))
        default: input = Self.hello(9)
        }
        let actions = machine.received(input, now: .now())
        let failure = actions.compactMap { if case .fail(let error) = $0 { error } else { nil } }.first
        #expect(failure?.code == code, "\(kind): \(actions)")
        #expect(!actions.contains { if case .deliver = $0 { true } else { false } }, "\(kind)")
    }

    @Test("liveness: a ping after the interval, the session dead after twice it")
    func liveness() {
        let start = NIODeadline.now()
        var machine = SessionOpenerMachine(nonce: 4, now: start)
        #expect(Self.open(&machine, after: ByteBuffer()))
        let opened = NIODeadline.now()
        let ping = machine.tick(now: opened + .seconds(5), interval: .seconds(5))
        #expect(ping.contains { if case .write = $0 { true } else { false } })
        let dead = machine.tick(now: opened + .seconds(10), interval: .seconds(5))
        #expect(dead.contains { if case .fail(let error) = $0 { error.code == .peerDead } else { false } })
    }
}
