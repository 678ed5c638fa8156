import NIOCore

/// One frame of the session layer (docs/framing.md §1, §2): a 28-byte header, a payload and a
/// CRC-32C trailer.
public struct SessionFrame: Sendable, Hashable {
    /// What a frame is for (docs/framing.md §2).
    public enum Kind: UInt8, Sendable, Hashable, CaseIterable {
        /// HELLO (`01`): the opener starts a session with a fresh nonce, sequence 0.
        case hello = 0x01
        /// HELLO_ACK (`02`): the responder answers a HELLO with its nonce; the session is open.
        case helloAck = 0x02
        /// DATA (`03`): the next bytes of the session's stream, in either direction.
        case data = 0x03
        /// PING (`04`): asks the other side to show it is alive; up to 8 opaque payload bytes.
        case ping = 0x04
        /// PONG (`05`): the answer to a PING, carrying its payload unchanged.
        case pong = 0x05
        /// CLOSE (`06`): ends the session; the payload starts with a ``SessionFrame/CloseReason``.
        case close = 0x06
    }

    /// Why a session ended: the first payload byte of CLOSE (docs/framing.md §2).
    public enum CloseReason: UInt8, Sendable, Hashable {
        /// `01`: the sender has finished with the session (a responder's `Connection: close`).
        case endOfStream = 0x01
        /// `02`: the sender received a frame it could not verify.
        case integrityError = 0x02
        /// `03`: a valid frame broke a rule of the protocol.
        case protocolError = 0x03
        /// `04`: the device is going away.
        case shuttingDown = 0x04
    }

    /// The four bytes every frame starts with: `AC CE 55 ED`.
    public static let magic: [UInt8] = [0xAC, 0xCE, 0x55, 0xED]
    /// The format byte of this frame layout; a frame with any other value is invalid.
    public static let format: UInt8 = 1
    /// The header, its CRC included.
    public static let headerSize = 28
    /// The header and the trailing frame CRC.
    public static let overhead = 32
    /// The largest whole frame: one 16 KiB USB bulk transfer.
    public static let maxFrameSize = 16384
    /// The smallest `max_frame` a HELLO or HELLO_ACK may announce.
    public static let minFrameSize = 64
    /// The largest payload: ``maxFrameSize`` less the header and the frame CRC.
    public static let maxPayload = maxFrameSize - overhead
    /// The session protocol version this implementation speaks.
    public static let version: UInt8 = 1

    /// The frame's type.
    public var kind: Kind
    /// The session the frame belongs to: the opener's random nonce, never 0 on the wire.
    public var nonce: UInt64
    /// The frame's number in its direction of the session (HELLO and HELLO_ACK are 0).
    public var sequence: UInt32
    /// The bytes between the header and the frame CRC.
    public var payload: ByteBuffer

    /// A frame to send; ``encode(into:)`` writes its bytes.
    ///
    /// - Parameters:
    ///   - kind: the frame's type.
    ///   - nonce: the session's nonce (never 0 on the wire).
    ///   - sequence: the frame's number in its direction of the session.
    ///   - payload: the payload; empty by default.
    public init(_ kind: Kind, nonce: UInt64, sequence: UInt32, payload: ByteBuffer = ByteBuffer()) {
        self.kind = kind
        self.nonce = nonce
        self.sequence = sequence
        self.payload = payload
    }

    /// The HELLO or HELLO_ACK payload: a version, three zero bytes, the largest frame accepted.
    public static func handshakePayload(version: UInt8, maxFrame: Int) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(version)
        buffer.writeBytes([0, 0, 0])
        buffer.writeInteger(UInt32(maxFrame))
        return buffer
    }

    /// The CLOSE payload: a reason and three zero bytes, then an optional short text.
    public static func closePayload(_ reason: CloseReason, text: String = "") -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(reason.rawValue)
        buffer.writeBytes([0, 0, 0])
        buffer.writeBytes(text.utf8.prefix(200))
        return buffer
    }

    /// Appends the frame's bytes to `buffer`.
    public func encode(into buffer: inout ByteBuffer) {
        Self.encode(self.kind, nonce: self.nonce, sequence: self.sequence, payload: self.payload, into: &buffer)
    }

    /// Appends a frame carrying `payload` to `buffer` without building a ``SessionFrame`` first.
    public static func encode(
        _ kind: Kind,
        nonce: UInt64,
        sequence: UInt32,
        payload: ByteBuffer,
        into buffer: inout ByteBuffer
    ) {
        buffer.reserveCapacity(minimumWritableBytes: Self.overhead + payload.readableBytes)
        let headerCRC = Self.writeHeader(
            kind,
            nonce: nonce,
            sequence: sequence,
            length: payload.readableBytes,
            into: &buffer
        )
        buffer.writeImmutableBuffer(payload)
        buffer.writeInteger(Self.frameCRC(headerCRC: headerCRC, payload: payload))
    }

    /// Appends a frame's 28-byte header to `buffer`; returns the CRC-32C of those 28 bytes (where
    /// the frame CRC starts).
    @discardableResult
    static func writeHeader(
        _ kind: Kind,
        nonce: UInt64,
        sequence: UInt32,
        length: Int,
        into buffer: inout ByteBuffer
    ) -> UInt32 {
        // Laid out on the stack and appended in one write: nine writes of the integers, each
        // with its own capacity check, cost more per frame than the header's CRC.
        var header: (UInt64, UInt64, UInt64, UInt32) = (0, 0, 0, 0)
        return withUnsafeMutableBytes(of: &header) { bytes in
            bytes.storeBytes(of: UInt32(0xACCE_55ED).bigEndian, toByteOffset: 0, as: UInt32.self)  // Self.magic
            bytes[4] = Self.format
            bytes[5] = kind.rawValue
            bytes.storeBytes(of: nonce.bigEndian, toByteOffset: 8, as: UInt64.self)
            bytes.storeBytes(of: sequence.bigEndian, toByteOffset: 16, as: UInt32.self)
            bytes.storeBytes(of: UInt32(truncatingIfNeeded: length).bigEndian, toByteOffset: 20, as: UInt32.self)
            let headerCRC = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<24]))
            bytes.storeBytes(of: headerCRC.bigEndian, toByteOffset: 24, as: UInt32.self)
            buffer.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[0..<Self.headerSize]))
            return CRC32C.update(headerCRC, UnsafeRawBufferPointer(rebasing: bytes[24..<Self.headerSize]))
        }
    }

    /// The frame CRC: over the header (whose own CRC is `headerCRC`) and the payload.
    static func frameCRC(headerCRC: UInt32, payload: ByteBuffer) -> UInt32 {
        payload.withUnsafeReadableBytes { CRC32C.update(headerCRC, $0) }
    }
}

extension SessionFrame: CustomStringConvertible {
    /// How `-v` shows a frame: its type, nonce, sequence number and length.
    public var description: String {
        let nonce = String(self.nonce, radix: 16)
        var text = "\(self.kind.name) nonce=\(String(repeating: "0", count: max(0, 16 - nonce.count)))\(nonce)"
        text += " seq=\(self.sequence) len=\(self.payload.readableBytes)"
        if self.kind == .close, let reason = self.payload.getInteger(at: self.payload.readerIndex, as: UInt8.self) {
            text += " reason=\(reason)"
        }
        return text
    }
}

extension SessionFrame.Kind {
    /// The name docs/framing.md uses.
    public var name: String {
        switch self {
        case .hello: return "HELLO"
        case .helloAck: return "HELLO_ACK"
        case .data: return "DATA"
        case .ping: return "PING"
        case .pong: return "PONG"
        case .close: return "CLOSE"
        }
    }
}
