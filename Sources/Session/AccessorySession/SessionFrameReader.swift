import NIOCore

/// Cuts frames out of a byte stream (docs/framing.md §1, §5), free of I/O: bytes in, frames or
/// a named problem out. Frames may arrive split across any number of reads.
public struct SessionFrameReader: Sendable {
    /// Why bytes are not a valid frame.
    public enum Problem: Sendable, Hashable, CustomStringConvertible {
        /// The bytes do not start with the magic `AC CE 55 ED`.
        case badMagic
        /// The format byte (given) is not 1.
        case badFormat(UInt8)
        /// The header CRC does not match the 24 bytes before it.
        case badHeaderCRC
        /// The header announces a payload (of the given length) longer than
        /// ``SessionFrameReader/maxFrameSize`` allows.
        case tooLong(Int)
        /// The frame CRC does not match: the frame was damaged in transit.
        case badFrameCRC
        /// The type byte (given) names no ``SessionFrame/Kind``.
        case unknownType(UInt8)
        /// The payload length (given) is not allowed for the frame's type: HELLO and HELLO_ACK
        /// 8 … 64 bytes, PING and PONG at most 8, CLOSE 4 … 204.
        case badPayload(SessionFrame.Kind, Int)
        /// The frame carries nonce 0, which no session uses.
        case zeroNonce
        /// A HELLO or HELLO_ACK (the given kind) with version 0 or a `max_frame` outside 64 … 16384.
        case badHandshake(SessionFrame.Kind)

        public var description: String {
            switch self {
            case .badMagic: return "bytes that do not start a frame (no magic AC CE 55 ED)"
            case .badFormat(let format): return "a frame of format \(format) (only 1 is defined)"
            case .badHeaderCRC: return "a frame header whose CRC does not match"
            case .tooLong(let length): return "a frame announcing \(length) payload bytes, more than allowed"
            case .badFrameCRC: return "a frame whose CRC does not match (damaged in transit)"
            case .unknownType(let type): return "a frame of unknown type \(type)"
            case .badPayload(let kind, let length): return "a \(kind.name) frame with a \(length)-byte payload"
            case .zeroNonce: return "a frame with nonce 0"
            case .badHandshake(let kind): return "a \(kind.name) with version 0 or a max_frame outside 64 … 16384"
            }
        }
    }

    /// What ``next()`` found at the front of the input.
    public enum Next: Sendable {
        /// A valid frame, now taken off the input.
        case frame(SessionFrame)
        /// The input holds no whole frame yet (or nothing): append more bytes and call again.
        case needMoreBytes
        /// The input does not start with a valid frame; nothing was consumed.
        case invalid(Problem)
    }

    /// The largest whole frame accepted (the `max_frame` this side announced).
    public var maxFrameSize: Int
    /// The front of the input, contiguous: where frames are checked and cut.
    private var buffer = ByteBuffer()
    /// Reads not yet needed at the front, untouched. Only the bytes that complete the frame cut
    /// short at the end of a read are copied to the front; the rest of each read is taken as it
    /// came (copying every read whole cost the bulk rate a pass over every byte).
    private var queued = CircularBuffer<ByteBuffer>()
    /// Whether the front is a buffer of the reader's own (made by ``pullToFront(_:)``, not
    /// shared with a read or a payload handed out): bytes are then appended to it in place, so
    /// a frame arriving in many small reads (a serial line's) is copied once, not once per read.
    private var frontIsOwned = false
    /// Bytes copied to the front so far (tests check that it stays linear).
    private(set) var copiedBytes = 0

    /// A reader with nothing buffered.
    ///
    /// - Parameter maxFrameSize: the largest whole frame accepted, in bytes, header and frame CRC
    ///   included (the `max_frame` this side announced); ``SessionFrame/maxFrameSize`` (16384)
    ///   by default.
    public init(maxFrameSize: Int = SessionFrame.maxFrameSize) {
        self.maxFrameSize = maxFrameSize
    }

    /// Bytes received and not yet taken as frames.
    public var bufferedBytes: Int {
        self.queued.reduce(self.buffer.readableBytes) { $0 + $1.readableBytes }
    }

    /// Adds bytes read from the stream after those already buffered; an empty buffer is ignored.
    /// The bytes are kept as they came, not copied, until a frame needs them contiguous.
    ///
    /// - Parameter bytes: the next bytes read.
    public mutating func append(_ bytes: ByteBuffer) {
        guard bytes.readableBytes > 0 else { return }
        if self.buffer.readableBytes == 0 && self.queued.isEmpty {
            self.buffer = bytes
            self.frontIsOwned = false
        } else {
            self.queued.append(bytes)
        }
    }

    /// Drops everything received so far.
    public mutating func discardAll() {
        self.buffer = ByteBuffer()
        self.frontIsOwned = false
        self.queued.removeAll()
    }

    /// Takes the frame at the front of the input, strictly: the input must start with a valid
    /// frame. On ``Next/invalid(_:)`` nothing is consumed; the caller ends the session.
    public mutating func next() -> Next {
        while true {
            switch Self.check(self.buffer, at: self.buffer.readerIndex, maxFrameSize: self.maxFrameSize) {
            case .invalid(let problem):
                return .invalid(problem)
            case .valid(let length):
                return .frame(self.takeFront(payloadLength: length))
            case .needMoreBytes:
                guard self.pullToFront(self.bytesToCheck()) else { return .needMoreBytes }
            }
        }
    }

    /// How many bytes at the front the next check needs: the header, then the whole frame.
    private func bytesToCheck() -> Int {
        let start = self.buffer.readerIndex
        guard self.buffer.readableBytes >= SessionFrame.headerSize,
            let length = self.buffer.getInteger(at: start + 20, as: UInt32.self)
        else { return SessionFrame.headerSize }
        // A length too large is reported by the check once the header is there.
        return SessionFrame.overhead + min(Int(length), self.maxFrameSize)
    }

    /// Moves queued bytes to the front until it holds `count` bytes (or all there are).
    /// Returns whether the front grew.
    private mutating func pullToFront(_ count: Int) -> Bool {
        guard !self.queued.isEmpty, self.buffer.readableBytes < count else { return false }
        if self.buffer.readableBytes == 0, let first = self.queued.popFirst() {
            self.buffer = first  // a whole read, not copied
            self.frontIsOwned = false
            return true
        }
        if !self.frontIsOwned || self.buffer.writableBytes < count - self.buffer.readableBytes {
            var front = ByteBuffer()
            front.reserveCapacity(count)
            front.writeImmutableBuffer(self.buffer)
            self.copiedBytes += self.buffer.readableBytes
            self.buffer = front
            self.frontIsOwned = true
        }
        while self.buffer.readableBytes < count, var next = self.queued.popFirst() {
            let part =
                next.readSlice(length: min(count - self.buffer.readableBytes, next.readableBytes)) ?? ByteBuffer()
            self.buffer.writeImmutableBuffer(part)
            self.copiedBytes += part.readableBytes
            if next.readableBytes > 0 { self.queued.prepend(next) }
        }
        return true
    }

    /// Moves every queued byte to the front (the scanning searches need one contiguous run).
    private mutating func consolidate() {
        guard !self.queued.isEmpty else { return }
        _ = self.pullToFront(self.bufferedBytes)
    }

    /// Takes the next valid frame anywhere in the input, discarding every byte before it (a
    /// handshake, or hunting for HELLO). Returns `nil` when no complete valid frame is buffered;
    /// a possible frame's start is kept for the next call.
    public mutating func nextScanning() -> SessionFrame? {
        self.consolidate()
        while let start = self.buffer.readableBytesView.firstIndex(of: SessionFrame.magic[0]) {
            self.buffer.moveReaderIndex(to: start)
            switch Self.check(self.buffer, at: start, maxFrameSize: self.maxFrameSize) {
            case .needMoreBytes:
                return nil
            case .valid(let length):
                return self.takeFront(payloadLength: length)
            case .invalid:
                self.buffer.moveReaderIndex(forwardBy: 1)
            }
        }
        self.buffer = ByteBuffer()
        return nil
    }

    /// Takes the frame whose first bytes are `prefix` (the 20 bytes from the magic to the
    /// sequence number of the one frame awaited: a HELLO_ACK with this opener's nonce), wherever
    /// it is in the input, discarding everything before it. Searching for the whole prefix,
    /// rather than frame by frame, means a frame cut short ahead of it (an abandoned answer)
    /// cannot swallow it.
    public mutating func next(startingWith prefix: [UInt8]) -> SessionFrame? {
        self.consolidate()
        while true {
            guard let start = Self.find(prefix, in: self.buffer) else {
                // Keep a tail that may be the start of the prefix.
                let keep = min(self.buffer.readableBytes, prefix.count - 1)
                self.buffer.moveReaderIndex(forwardBy: self.buffer.readableBytes - keep)
                return nil
            }
            self.buffer.moveReaderIndex(to: start)
            switch Self.check(self.buffer, at: start, maxFrameSize: self.maxFrameSize) {
            case .needMoreBytes: return nil
            case .valid(let length): return self.takeFront(payloadLength: length)
            case .invalid: self.buffer.moveReaderIndex(forwardBy: 1)
            }
        }
    }

    static func find(_ prefix: [UInt8], in buffer: ByteBuffer) -> Int? {
        let view = buffer.readableBytesView
        var from = view.startIndex
        while let first = view[from...].firstIndex(of: prefix[0]) {
            guard view.endIndex - first >= prefix.count else { return nil }
            if view[first..<(first + prefix.count)].elementsEqual(prefix) { return first }
            from = first + 1
        }
        return nil
    }

    // MARK: Checking

    enum Check {
        case valid(payloadLength: Int)
        case needMoreBytes
        case invalid(Problem)
    }

    /// Whether `buffer` holds a valid frame at `start`, checking as early as the bytes allow.
    ///
    /// Read from the raw bytes in one access: each of `ByteBuffer`'s `getInteger` calls is a
    /// checked access to its storage, and a dozen of them per frame were a visible share of
    /// the bulk rate.
    static func check(_ buffer: ByteBuffer, at start: Int, maxFrameSize: Int) -> Check {
        buffer.withUnsafeReadableBytes { readable in
            let offset = start - buffer.readerIndex
            guard offset >= 0, offset <= readable.count else { return .needMoreBytes }
            return Self.check(UnsafeRawBufferPointer(rebasing: readable[offset...]), maxFrameSize: maxFrameSize)
        }
    }

    /// ``check(_:at:maxFrameSize:)`` on the bytes from a frame's first byte on.
    static func check(_ bytes: UnsafeRawBufferPointer, maxFrameSize: Int) -> Check {
        let available = bytes.count
        for (offset, byte) in SessionFrame.magic.enumerated() {
            guard offset < available else { return .needMoreBytes }
            guard bytes[offset] == byte else { return .invalid(.badMagic) }
        }
        guard available > 4 else { return .needMoreBytes }
        let format = bytes[4]
        guard format == SessionFrame.format else { return .invalid(.badFormat(format)) }
        guard available >= SessionFrame.headerSize else { return .needMoreBytes }
        let headerCRC = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<24]))
        guard Self.bigEndianUInt32(bytes, at: 24) == headerCRC else { return .invalid(.badHeaderCRC) }
        let length = Int(Self.bigEndianUInt32(bytes, at: 20))
        guard length <= maxFrameSize - SessionFrame.overhead else { return .invalid(.tooLong(length)) }
        let type = bytes[5]
        guard let kind = SessionFrame.Kind(rawValue: type) else { return .invalid(.unknownType(type)) }
        guard Self.payloadLengthIsValid(kind, length) else { return .invalid(.badPayload(kind, length)) }
        guard available >= SessionFrame.overhead + length else { return .needMoreBytes }
        let frameCRC = CRC32C.update(
            headerCRC,
            UnsafeRawBufferPointer(rebasing: bytes[24..<(SessionFrame.headerSize + length)])
        )
        guard Self.bigEndianUInt32(bytes, at: SessionFrame.headerSize + length) == frameCRC else {
            return .invalid(.badFrameCRC)
        }
        guard bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self) != 0 else { return .invalid(.zeroNonce) }
        if kind == .hello || kind == .helloAck {
            let version = bytes[SessionFrame.headerSize]
            let maxFrame = Int(Self.bigEndianUInt32(bytes, at: SessionFrame.headerSize + 4))
            guard version >= 1, (SessionFrame.minFrameSize...SessionFrame.maxFrameSize).contains(maxFrame) else {
                return .invalid(.badHandshake(kind))
            }
        }
        return .valid(payloadLength: length)
    }

    private static func bigEndianUInt32(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> UInt32 {
        UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    /// docs/framing.md §2: the payload sizes each type allows.
    static func payloadLengthIsValid(_ kind: SessionFrame.Kind, _ length: Int) -> Bool {
        switch kind {
        case .hello, .helloAck: return (8...64).contains(length)
        case .data: return true
        case .ping, .pong: return length <= 8
        case .close: return length >= 4 && length <= 204
        }
    }

    /// Takes the checked frame at the front; its payload shares the front's storage from now on.
    private mutating func takeFront(payloadLength: Int) -> SessionFrame {
        self.frontIsOwned = false
        return Self.take(&self.buffer, payloadLength: payloadLength)
    }

    /// Takes a frame already checked valid off the front of `buffer`.
    static func take(_ buffer: inout ByteBuffer, payloadLength: Int) -> SessionFrame {
        let start = buffer.readerIndex
        let (type, nonce, sequence) = buffer.withUnsafeReadableBytes { bytes in
            (
                bytes[5],
                UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self)),
                UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: 16, as: UInt32.self))
            )
        }
        let kind = SessionFrame.Kind(rawValue: type) ?? .data
        let payload = buffer.getSlice(at: start + SessionFrame.headerSize, length: payloadLength) ?? ByteBuffer()
        buffer.moveReaderIndex(forwardBy: SessionFrame.overhead + payloadLength)
        // Not clear(): on storage the payload still shares, that allocates a new buffer as large.
        if buffer.readableBytes == 0 { buffer = ByteBuffer() }
        return SessionFrame(kind, nonce: nonce, sequence: sequence, payload: payload)
    }
}

extension SessionFrameReader {
    /// Drops the first buffered byte (the start of a frame found bad or cut short), so that
    /// scanning resumes after it.
    public mutating func dropFirstByte() {
        self.consolidate()
        if self.buffer.readableBytes > 0 { self.buffer.moveReaderIndex(forwardBy: 1) }
    }

    /// Takes every byte not yet read as frames (they belong to whatever comes next).
    public mutating func remainingBytes() -> ByteBuffer? {
        self.consolidate()
        defer { self.buffer = ByteBuffer() }
        return self.buffer.readableBytes > 0 ? self.buffer : nil
    }
}
