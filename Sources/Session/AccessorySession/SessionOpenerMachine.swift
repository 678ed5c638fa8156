import NIOCore

/// The opener's side of one session (docs/framing.md §3–§5), free of I/O: the handler feeds it
/// what arrives, what the layer above writes, and the clock; it answers with what to do.
struct SessionOpenerMachine {
    enum Action {
        /// Send these bytes (whole frames) to the device.
        case write(ByteBuffer)
        /// The session's stream delivered these bytes to the layer above.
        case deliver(ByteBuffer)
        /// The handshake completed.
        case established(version: UInt8, peerMaxFrame: Int)
        /// The device ended the session's stream cleanly (CLOSE 01): an end of input.
        case endOfStream
        /// The session failed; the stream must be closed.
        case fail(SessionError)
        /// Show a frame in the trace (sent or received).
        case trace(SessionFrame, sent: Bool)
    }

    enum State {
        case idle
        case handshaking
        case open
        case ended
    }

    private(set) var nonce: UInt64
    let maxFrameSize: Int
    private(set) var state = State.idle
    private var reader: SessionFrameReader
    private var sentSequence: UInt32 = 0
    /// The buffers DATA frames are laid out in, reused once written (``DataFrameEncoder``).
    private var framePool = DataFrameEncoder.makePool()
    private var expectedSequence: UInt32 = 0
    private var peerMaxFrame = SessionFrame.maxFrameSize
    private var lastReceived: NIODeadline
    private var pingOutstanding = false
    private let tracing: Bool

    init(nonce: UInt64, maxFrameSize: Int = SessionFrame.maxFrameSize, now: NIODeadline, tracing: Bool = false) {
        self.nonce = nonce
        self.maxFrameSize = maxFrameSize
        self.reader = SessionFrameReader(maxFrameSize: maxFrameSize)
        self.lastReceived = now
        self.tracing = tracing
    }

    /// Sends HELLO.
    mutating func start() -> [Action] {
        guard case .idle = self.state else { return [] }
        self.state = .handshaking
        let hello = SessionFrame(
            .hello,
            nonce: self.nonce,
            sequence: 0,
            payload: SessionFrame.handshakePayload(version: SessionFrame.version, maxFrame: self.maxFrameSize)
        )
        self.sentSequence = 1
        var bytes = ByteBuffer()
        hello.encode(into: &bytes)
        return self.traced(hello, sent: true) + [.write(bytes)]
    }

    /// The first 20 bytes of the HELLO_ACK this opener waits for.
    private var awaitedPrefix: [UInt8] {
        var prefix = SessionFrame.magic + [SessionFrame.format, SessionFrame.Kind.helloAck.rawValue, 0, 0]
        withUnsafeBytes(of: self.nonce.bigEndian) { prefix += $0 }
        return prefix + [0, 0, 0, 0]
    }

    /// HELLO again, with a fresh nonce, during the handshake: a responder still reading a frame
    /// cut short when the first one arrived took it as payload (docs/framing.md §3). Only the
    /// answer to the latest HELLO is accepted, so the session is the one the responder started
    /// last.
    mutating func resendHello(nonce: UInt64) -> [Action] {
        guard case .handshaking = self.state else { return [] }
        self.nonce = nonce
        let hello = SessionFrame(
            .hello,
            nonce: self.nonce,
            sequence: 0,
            payload: SessionFrame.handshakePayload(version: SessionFrame.version, maxFrame: self.maxFrameSize)
        )
        var bytes = ByteBuffer()
        hello.encode(into: &bytes)
        return self.traced(hello, sent: true) + [.write(bytes)]
    }

    /// Bytes from the device.
    mutating func received(_ bytes: ByteBuffer, now: NIODeadline) -> [Action] {
        var actions: [Action] = []
        switch self.state {
        case .idle, .ended:
            return []
        case .handshaking:
            self.reader.append(bytes)
            // Everything before our HELLO_ACK is dropped: the rest of an old answer, old frames.
            while let frame = self.reader.next(startingWith: self.awaitedPrefix) {
                actions += self.traced(frame, sent: false)
                let version = frame.payload.getInteger(at: frame.payload.readerIndex, as: UInt8.self) ?? 0
                guard version >= 1, version <= SessionFrame.version else {
                    return actions
                        + self.fail(
                            .protocolViolation,
                            "the device chose session version \(version), which this host does not speak"
                        )
                }
                self.peerMaxFrame = Int(
                    frame.payload.getInteger(at: frame.payload.readerIndex + 4, as: UInt32.self) ?? 0
                )
                self.state = .open
                self.expectedSequence = 1
                self.lastReceived = now
                actions.append(.established(version: version, peerMaxFrame: self.peerMaxFrame))
                return actions + self.readFrames(now: now)
            }
            return actions
        case .open:
            self.reader.append(bytes)
            return self.readFrames(now: now)
        }
    }

    /// Frames for bytes the layer above writes: DATA of at most the device's `max_frame`.
    mutating func send(_ bytes: ByteBuffer) -> [Action] {
        guard case .open = self.state else { return [] }
        let encoder = DataFrameEncoder(
            nonce: self.nonce,
            maxPayload: min(self.peerMaxFrame, SessionFrame.maxFrameSize) - SessionFrame.overhead
        )
        guard self.tracing else {
            return encoder.encode(bytes, sequence: &self.sentSequence, pool: &self.framePool).map { .write($0) }
        }
        var actions: [Action] = []
        let buffers = encoder.encode(bytes, sequence: &self.sentSequence, pool: &self.framePool) {
            actions.append(.trace($0, sent: true))
        }
        return actions + buffers.map { .write($0) }
    }

    /// Ends the session from this side: CLOSE 01, best effort (the stream closes right after).
    mutating func close() -> [Action] {
        guard case .open = self.state else {
            self.state = .ended
            return []
        }
        self.state = .ended
        let frame = SessionFrame(
            .close,
            nonce: self.nonce,
            sequence: self.nextSequence(),
            payload: SessionFrame.closePayload(.endOfStream)
        )
        var out = ByteBuffer()
        frame.encode(into: &out)
        return self.traced(frame, sent: true) + [.write(out)]
    }

    /// The host was not reading: it held the device back (its application had not taken what
    /// came), or its event loop did not run. Silence meanwhile is the host's own doing, so the
    /// liveness clock starts again (docs/framing.md §4).
    mutating func holdingBack(now: NIODeadline) {
        self.restartLivenessClock(now: now)
    }

    /// The device took bytes of ours since the last tick and more still wait for it: it reads
    /// slowly, and its PONG waits behind our data, so the liveness clock starts again
    /// (docs/framing.md §4). One that takes nothing for twice the interval is still found dead.
    mutating func tookFromBacklog(now: NIODeadline) {
        self.restartLivenessClock(now: now)
    }

    private mutating func restartLivenessClock(now: NIODeadline) {
        guard case .open = self.state else { return }
        self.lastReceived = now
    }

    /// Liveness (docs/framing.md §4): a PING after `interval` of silence, failure after twice it.
    mutating func tick(now: NIODeadline, interval: TimeAmount) -> [Action] {
        guard case .open = self.state else { return [] }
        let silence = now - self.lastReceived
        if silence >= interval * 2 {
            return self.fail(
                .peerDead,
                "the device sent nothing, not even an answer to a ping, for \(silence.nanoseconds / 1_000_000) ms: it is gone or hung"
            )
        }
        guard silence >= interval, !self.pingOutstanding else { return [] }
        self.pingOutstanding = true
        var payload = ByteBuffer()
        payload.writeInteger(UInt64(now.uptimeNanoseconds))
        let ping = SessionFrame(.ping, nonce: self.nonce, sequence: self.nextSequence(), payload: payload)
        var out = ByteBuffer()
        ping.encode(into: &out)
        return self.traced(ping, sent: true) + [.write(out)]
    }

    // MARK: Inside the session

    private mutating func readFrames(now: NIODeadline) -> [Action] {
        var actions: [Action] = []
        while case .open = self.state {
            switch self.reader.next() {
            case .needMoreBytes:
                return actions
            case .invalid(let problem):
                return actions + self.fail(.integrity, "the device sent \(problem); the session is restarted")
            case .frame(let frame):
                if self.tracing { actions.append(.trace(frame, sent: false)) }
                // The bulk of a session: DATA in sequence, appended without an array of its own.
                if frame.kind == .data, frame.nonce == self.nonce, frame.sequence == self.expectedSequence {
                    self.accepted(now: now)
                    if frame.payload.readableBytes > 0 { actions.append(.deliver(frame.payload)) }
                    continue
                }
                actions += self.handle(frame, now: now)
            }
        }
        return actions
    }

    private mutating func handle(_ frame: SessionFrame, now: NIODeadline) -> [Action] {
        guard frame.nonce == self.nonce else {
            return self.fail(
                .sessionLost,
                "another host process started its own session on this line (a \(frame.kind.name) of another session arrived); only one may use it at a time"
            )
        }
        if frame.kind == .hello || frame.kind == .helloAck {
            return self.fail(.protocolViolation, "the device sent a \(frame.kind.name) inside the session")
        }
        guard frame.sequence == self.expectedSequence else {
            return self.fail(
                .integrity,
                "frame \(frame.sequence) arrived where \(self.expectedSequence) was due: the line lost or repeated a frame"
            )
        }
        self.accepted(now: now)
        switch frame.kind {
        case .data:
            return frame.payload.readableBytes == 0 ? [] : [.deliver(frame.payload)]
        case .ping:
            let pong = SessionFrame(.pong, nonce: self.nonce, sequence: self.nextSequence(), payload: frame.payload)
            var out = ByteBuffer()
            pong.encode(into: &out)
            return self.traced(pong, sent: true) + [.write(out)]
        case .pong:
            return []
        case .close:
            self.state = .ended
            let reason = frame.payload.getInteger(at: frame.payload.readerIndex, as: UInt8.self) ?? 0
            if reason == SessionFrame.CloseReason.endOfStream.rawValue { return [.endOfStream] }
            let text =
                frame.payload.getString(at: frame.payload.readerIndex + 4, length: frame.payload.readableBytes - 4)
                ?? ""
            let why: String
            switch SessionFrame.CloseReason(rawValue: reason) {
            case .integrityError: why = "it received a damaged frame"
            case .shuttingDown: why = "it is shutting down"
            default: why = "a protocol error (reason \(reason))"
            }
            return [
                .fail(
                    SessionError(
                        .closedByDevice,
                        "the device ended the session: \(why)" + (text.isEmpty ? "" : " (\(text))")
                    )
                )
            ]
        case .hello, .helloAck:
            return self.fail(.protocolViolation, "the device sent a \(frame.kind.name) inside the session")
        }
    }

    /// A frame passed the nonce and sequence checks: the next is due, and the device is alive.
    private mutating func accepted(now: NIODeadline) {
        self.expectedSequence &+= 1
        self.lastReceived = now
        self.pingOutstanding = false
    }

    private mutating func fail(_ code: SessionError.Code, _ message: String) -> [Action] {
        self.state = .ended
        self.reader.discardAll()
        return [.fail(SessionError(code, message))]
    }

    private mutating func nextSequence() -> UInt32 {
        defer { self.sentSequence &+= 1 }
        return self.sentSequence
    }

    private func traced(_ frame: SessionFrame, sent: Bool) -> [Action] {
        self.tracing ? [.trace(frame, sent: sent)] : []
    }
}
