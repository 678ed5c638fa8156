import NIOCore

/// The responder's side of the session layer (docs/framing.md §3–§6), free of I/O: PLAIN with
/// a watch for HELLO, SESSION, or HUNTING. The handler feeds it bytes from the host and from
/// the HTTP layer, and carries out its actions.
public struct SessionResponderMachine: Sendable {
    /// The responder's state (docs/framing.md §6).
    public enum Mode: Sendable, Equatable {
        /// PLAIN: bytes go to the HTTP layer, watched for a HELLO.
        case plain
        /// SESSION: inside the session with `nonce`; the HTTP stream travels in DATA frames.
        case session(nonce: UInt64)
        /// HUNTING: after an integrity error, every byte is discarded until a valid HELLO.
        case hunting
    }

    /// What the handler must do, in the order given.
    public enum Action: Sendable {
        /// Bytes of the current stream (plain or session) for the HTTP layer.
        case deliver(ByteBuffer)
        /// Bytes for the host (frames in a session, raw in plain mode).
        case write(ByteBuffer)
        /// Abandon the HTTP exchange and everything queued for the host, reset the HTTP layer.
        /// Emitted before the frame that starts the new state (HELLO_ACK, CLOSE) is written.
        case abandon(why: Abandon)
        /// Show a frame in the trace.
        case trace(SessionFrame, sent: Bool)
    }

    /// Why the HTTP exchange in progress is abandoned.
    public enum Abandon: Sendable, Equatable {
        /// A HELLO started a new session.
        case restart
        /// The host closed the session (CLOSE).
        case closedByHost
        /// The host's bytes could not be verified; CLOSE 02 follows.
        case integrity(String)
        /// A HELLO came after ``refuseNewSessions()``: it is not answered, and the transport
        /// should close (docs/framing.md §3, a responder going away).
        case refused
    }

    /// The current state; ``Mode/plain`` at the start.
    public private(set) var mode = Mode.plain {
        didSet {
            // Out of a session, no frames are written: the frame buffers are not kept.
            if case .session = self.mode {} else { self.framePool.release() }
        }
    }
    private var watch = HelloWatch()
    private var reader = SessionFrameReader()
    private var sentSequence: UInt32 = 0
    /// The buffers DATA frames are laid out in, reused once written (``DataFrameEncoder``);
    /// released when the session ends.
    private var framePool = DataFrameEncoder.makePool()
    private var expectedSequence: UInt32 = 0
    private var peerMaxFrame = SessionFrame.maxFrameSize
    private let tracing: Bool
    /// The session this side ended with CLOSE 01, while frames of it the host sent before it saw
    /// the CLOSE may still arrive (in plain mode; see ``dropEndedSessionFrames()``).
    private var endedSession: UInt64?
    /// Set by ``refuseNewSessions()``: a HELLO is no longer answered.
    private var refusesSessions = false

    /// A machine in plain mode, at the start of a stream.
    ///
    /// - Parameter tracing: whether every frame sent or received is also returned as
    ///   ``Action/trace(_:sent:)``; `false` by default.
    public init(tracing: Bool = false) {
        self.tracing = tracing
    }

    /// The responder is going away (a graceful shutdown began): from now on a HELLO is not
    /// answered but returned as ``Abandon/refused``, and everything after it is discarded, so
    /// that the host, which gave up its old session, opens the transport again (to the next
    /// device) instead of sending a request into a session that the closing transport would
    /// end. The session or plain stream under way is served on.
    public mutating func refuseNewSessions() {
        self.refusesSessions = true
    }

    /// Bytes from the host.
    public mutating func received(_ bytes: ByteBuffer) -> [Action] {
        self.process(bytes)
    }

    /// Whether part of a frame (or of a possible HELLO) waits for more bytes: the handler then
    /// calls ``stalled()`` if none come for a while.
    public var hasPartialInput: Bool {
        self.watch.heldBytes > 0 || self.reader.bufferedBytes > 0
    }

    /// No byte arrived for a while and part of a frame is waiting: it will not be completed (a
    /// host died in the middle of writing it, or a plain body ends in `AC`). In plain mode the
    /// held bytes are plain after all; otherwise the partial frame is dropped from its first
    /// byte and the rest is scanned again, so a HELLO behind it is found (docs/framing.md §5).
    public mutating func stalled() -> [Action] {
        switch self.mode {
        case .plain where self.endedSession != nil:
            // A frame of the ended session that stopped halfway (its host died while writing
            // it): dropped, since its bytes were never plain input.
            self.endedSession = nil
            self.reader.discardAll()
            return []
        case .plain:
            let (segments, rest) = self.watch.release()
            var actions = self.apply(segments)
            if let rest { actions += self.process(rest) }
            return actions
        case .session(let nonce):
            guard self.reader.bufferedBytes > 0 else { return [] }
            return self.fail("a frame stopped arriving halfway", nonce: nonce) + self.process(nil)
        case .hunting:
            self.reader.dropFirstByte()
            return self.process(nil)
        }
    }

    /// Runs `input` (and whatever is buffered) through the states until nothing more can be done.
    private mutating func process(_ bytes: ByteBuffer?) -> [Action] {
        var actions: [Action] = []
        var input = bytes
        while true {
            switch self.mode {
            case .plain where self.endedSession != nil:
                if let bytes = input { self.reader.append(bytes) }
                input = nil
                actions += self.dropEndedSessionFrames()
                if self.endedSession != nil { return actions }  // the rest of a frame is due
                if case .plain = self.mode {
                    input = self.reader.remainingBytes()
                    if input == nil { return actions }
                }
            case .plain:
                guard let bytes = input else { return actions }
                input = nil
                let (segments, rest) = self.watch.feed(bytes)
                actions += self.apply(segments)
                if let rest { self.reader.append(rest) }
                if case .plain = self.mode { return actions }
            case .hunting:
                if let bytes = input { self.reader.append(bytes) }
                input = nil
                while case .hunting = self.mode, let frame = self.reader.nextScanning() {
                    if frame.kind == .hello { actions += self.restart(frame) }
                }
                if case .hunting = self.mode { return actions }
            case .session:
                if let bytes = input { self.reader.append(bytes) }
                input = nil
                actions += self.readSession()
                switch self.mode {
                case .session, .hunting:
                    if case .session = self.mode { return actions }
                case .plain:
                    // Bytes after the host's CLOSE are the next plain request or HELLO.
                    input = self.reader.remainingBytes()
                    if input == nil { return actions }
                }
            }
        }
    }

    private mutating func apply(_ segments: [HelloWatch.Segment]) -> [Action] {
        var actions: [Action] = []
        for segment in segments {
            switch segment {
            case .plain(let plain): actions.append(.deliver(plain))
            case .hello(let hello): actions += self.restart(hello)
            }
        }
        return actions
    }

    /// Bytes the HTTP layer writes.
    public mutating func send(_ bytes: ByteBuffer) -> [Action] {
        switch self.mode {
        case .plain:
            return [.write(bytes)]
        case .hunting:
            return []
        case .session(let nonce):
            let encoder = DataFrameEncoder(
                nonce: nonce,
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
    }

    /// The HTTP layer ends its stream (it would close the connection). In a session that is
    /// CLOSE 01, and the responder waits for the next session or plain request; returns `nil`
    /// in plain mode, where the transport itself must close.
    public mutating func endStream() -> [Action]? {
        switch self.mode {
        case .plain:
            return nil
        case .hunting:
            return []
        case .session(let nonce):
            let close = SessionFrame(
                .close,
                nonce: nonce,
                sequence: self.nextSequence(),
                payload: SessionFrame.closePayload(.endOfStream)
            )
            self.mode = .plain
            self.watch = HelloWatch()
            // The host may be sending still (an upload answered early): the rest of the frame
            // being read and the frames behind it are dropped, not read as plain requests.
            self.endedSession = nonce
            return self.encoded(close)
        }
    }

    // MARK: Inside a session

    /// Reads frames while the session lasts; returns when more bytes are needed or the mode
    /// changed (a CLOSE: plain; an integrity error: hunting).
    private mutating func readSession() -> [Action] {
        var actions: [Action] = []
        while case .session(let nonce) = self.mode {
            switch self.reader.next() {
            case .needMoreBytes:
                return actions
            case .invalid(let problem):
                return actions + self.fail("the host sent \(problem)", nonce: nonce)
            case .frame(let frame):
                if self.tracing { actions.append(.trace(frame, sent: false)) }
                if frame.kind == .hello {
                    actions += self.restart(frame)
                    continue
                }
                guard frame.nonce == nonce else { continue }  // stale: an older session's frame
                guard frame.sequence == self.expectedSequence else {
                    return actions
                        + self.fail(
                            "frame \(frame.sequence) arrived where \(self.expectedSequence) was due",
                            nonce: nonce,
                            badFrameStillBuffered: false
                        )
                }
                self.expectedSequence &+= 1
                switch frame.kind {
                case .data:
                    if frame.payload.readableBytes > 0 { actions.append(.deliver(frame.payload)) }
                case .ping:
                    actions += self.encoded(
                        SessionFrame(.pong, nonce: nonce, sequence: self.nextSequence(), payload: frame.payload)
                    )
                case .pong, .helloAck, .hello:
                    break
                case .close:
                    // Whatever the reason, the host is done with this session (docs/framing.md §4).
                    self.mode = .plain
                    self.watch = HelloWatch()
                    actions.append(.abandon(why: .closedByHost))
                }
            }
        }
        return actions
    }

    /// After this side ended a session (CLOSE 01), frames of it that were already on their way
    /// (the host had not seen the CLOSE: an upload answered early) are read whole and dropped,
    /// the rest of the one being read included, so that none of their bytes reach the HTTP layer
    /// as a plain request (docs/framing.md §6). A HELLO starts the next session; the first bytes
    /// that do not start a frame are plain input (a plain host's request), and end this.
    private mutating func dropEndedSessionFrames() -> [Action] {
        var actions: [Action] = []
        while self.endedSession != nil {
            switch self.reader.next() {
            case .needMoreBytes:
                return actions
            case .invalid:
                self.endedSession = nil
            case .frame(let frame):
                if self.tracing { actions.append(.trace(frame, sent: false)) }
                if frame.kind == .hello { return actions + self.restart(frame) }
            }
        }
        return actions
    }

    private mutating func restart(_ hello: SessionFrame) -> [Action] {
        self.endedSession = nil
        if self.refusesSessions {
            self.mode = .hunting
            self.reader.discardAll()
            return (self.tracing ? [.trace(hello, sent: false)] : []) + [.abandon(why: .refused)]
        }
        let version = min(
            hello.payload.getInteger(at: hello.payload.readerIndex, as: UInt8.self) ?? 1,
            SessionFrame.version
        )
        self.peerMaxFrame = Int(hello.payload.getInteger(at: hello.payload.readerIndex + 4, as: UInt32.self) ?? 16384)
        self.mode = .session(nonce: hello.nonce)
        self.watch = HelloWatch()
        self.sentSequence = 0
        self.expectedSequence = 1
        var actions: [Action] = self.tracing ? [.trace(hello, sent: false)] : []
        actions.append(.abandon(why: .restart))
        let ack = SessionFrame(
            .helloAck,
            nonce: hello.nonce,
            sequence: self.nextSequence(),
            payload: SessionFrame.handshakePayload(version: max(1, version), maxFrame: SessionFrame.maxFrameSize)
        )
        return actions + self.encoded(ack)
    }

    private mutating func fail(_ why: String, nonce: UInt64, badFrameStillBuffered: Bool = true) -> [Action] {
        self.mode = .hunting
        self.endedSession = nil
        // Scanning resumes after the bad frame's first byte: a HELLO may hide behind it. (A
        // valid frame out of sequence has already been taken off the input.)
        if badFrameStillBuffered { self.reader.dropFirstByte() }
        let close = SessionFrame(
            .close,
            nonce: nonce,
            sequence: self.nextSequence(),
            payload: SessionFrame.closePayload(.integrityError, text: why)
        )
        return [.abandon(why: .integrity(why))] + self.encoded(close)
    }

    private mutating func encoded(_ frame: SessionFrame) -> [Action] {
        var out = ByteBuffer()
        frame.encode(into: &out)
        return (self.tracing ? [.trace(frame, sent: true)] : []) + [.write(out)]
    }

    private mutating func nextSequence() -> UInt32 {
        defer { self.sentSequence &+= 1 }
        return self.sentSequence
    }
}

extension SessionResponderMachine {
    /// In plain mode, the bytes held back as a possible HELLO when the input ended: plain input.
    public mutating func drainHeldPlainBytes() -> ByteBuffer? {
        guard case .plain = self.mode else { return nil }
        if self.endedSession != nil {
            // The input ended in the middle of a frame of the ended session: nothing plain.
            self.endedSession = nil
            self.reader.discardAll()
            return nil
        }
        return self.watch.drain()
    }
}
