import NIOCore

@testable import AccessorySession

/// Builds a byte stream for the session targets from the fuzzer's input: a series of pieces,
/// each chosen by a control byte — raw bytes, well-formed frames (correct CRCs, so the fuzzer
/// reaches the states behind them), damaged and cut-short frames, handshakes, plain HTTP. A CRC
/// is out of a mutator's reach; building the frames here is what lets the fuzzer explore
/// sessions at all.
struct SessionStream {
    /// The nonce most frames carry (the one the opener target uses, so its handshake can finish).
    static let nonce: UInt64 = 0x0102_0304_0506_0708

    private(set) var bytes: [UInt8] = []
    private var sequence: UInt32 = 0

    static func build(_ input: inout FuzzInput, maxPieces: Int = 64) -> [UInt8] {
        var stream = SessionStream()
        var pieces = 0
        while !input.isEmpty && pieces < maxPieces {
            stream.addPiece(&input)
            pieces += 1
        }
        return stream.bytes
    }

    private mutating func addPiece(_ input: inout FuzzInput) {
        let control = input.byte()
        switch control % 8 {
        case 0:
            self.bytes += input.take(Int(input.byte() % 64))
        case 1, 2:
            self.bytes += self.frame(&input)
        case 3:
            var frame = self.frame(&input)
            let position = Int(input.byte()) % max(1, frame.count)
            if !frame.isEmpty { frame[position] ^= max(1, input.byte()) }
            self.bytes += frame
        case 4:
            let frame = self.frame(&input)
            self.bytes += frame.prefix(Int(input.byte()) % max(1, frame.count))
        case 5:
            let kind: SessionFrame.Kind = control & 8 == 0 ? .hello : .helloAck
            let payload = SessionFrame.handshakePayload(
                version: input.byte() % 3,
                maxFrame: [64, 1024, SessionFrame.maxFrameSize, 63, 16385][Int(input.byte()) % 5]
            )
            self.bytes += Self.encode(kind.rawValue, nonce: self.pickNonce(&input), sequence: 0, payload: payload)
            self.sequence = 0
        case 6:
            self.bytes += Array("GET /status HTTP/1.1\r\nHost: accessory\r\n\r\n".utf8)
        default:
            // A frame claiming a length it does not have, or the largest allowed.
            let length = UInt32(input.byte()) << 8 | UInt32(input.byte())
            var header = SessionFrame.magic + [SessionFrame.format, SessionFrame.Kind.data.rawValue, 0, 0]
            withUnsafeBytes(of: Self.nonce.bigEndian) { header += $0 }
            withUnsafeBytes(of: UInt32(1).bigEndian) { header += $0 }
            withUnsafeBytes(of: length.bigEndian) { header += $0 }
            withUnsafeBytes(of: CRC32C.checksum(header).bigEndian) { header += $0 }
            self.bytes += header
        }
    }

    private mutating func pickNonce(_ input: inout FuzzInput) -> UInt64 {
        let choice = input.byte()
        switch choice % 4 {
        case 0: return 0
        case 1: return UInt64(choice)
        default: return Self.nonce
        }
    }

    /// A frame of any type byte (unknown ones included) with correct CRCs.
    private mutating func frame(_ input: inout FuzzInput) -> [UInt8] {
        let type = input.byte() % 8
        let nonce = self.pickNonce(&input)
        let sequenceChoice = input.byte()
        self.sequence &+= 1
        let sequence = sequenceChoice < 224 ? self.sequence : UInt32(sequenceChoice)
        var payload: ByteBuffer
        switch SessionFrame.Kind(rawValue: type) {
        case .hello?, .helloAck?:
            payload = SessionFrame.handshakePayload(version: 1, maxFrame: SessionFrame.maxFrameSize)
        case .close?:
            payload = SessionFrame.closePayload(
                SessionFrame.CloseReason(rawValue: input.byte() % 5) ?? .endOfStream,
                text: "bye"
            )
        case .ping?, .pong?:
            payload = ByteBuffer(bytes: input.take(8))
        default:
            payload = ByteBuffer(bytes: input.take(Int(input.byte())))
        }
        return Self.encode(type, nonce: nonce, sequence: sequence, payload: payload)
    }

    /// docs/framing.md §1 written out by hand (the type may be one the encoder would not make).
    static func encode(_ type: UInt8, nonce: UInt64, sequence: UInt32, payload: ByteBuffer) -> [UInt8] {
        var header = SessionFrame.magic + [SessionFrame.format, type, 0, 0]
        withUnsafeBytes(of: nonce.bigEndian) { header += $0 }
        withUnsafeBytes(of: sequence.bigEndian) { header += $0 }
        withUnsafeBytes(of: UInt32(payload.readableBytes).bigEndian) { header += $0 }
        withUnsafeBytes(of: CRC32C.checksum(header).bigEndian) { header += $0 }
        let body = Array(payload.readableBytesView)
        let frameCRC = CRC32C.checksum(header + body)
        var frame = header + body
        withUnsafeBytes(of: frameCRC.bigEndian) { frame += $0 }
        return frame
    }

    /// What a machine target takes from the input: an event per read (a stall, a write from
    /// the layer above, the clock moving; cycled), the read lengths, then the stream.
    struct Scenario {
        let events: ArraySlice<UInt8>
        let reads: [ByteBuffer]

        init(_ input: inout FuzzInput) {
            self.events = input.take(8)
            let splits = input.take(4)
            self.reads = SessionStream.reads(of: SessionStream.build(&input), splits: splits)
        }

        /// The event byte for read `index` (0 when the input gave none).
        func event(_ index: Int) -> UInt8 {
            self.events.isEmpty ? 0 : self.events[self.events.startIndex + index % self.events.count]
        }
    }

    /// The stream cut into reads whose lengths cycle through `splits` (0: the whole rest), so
    /// frames arrive split at every point the fuzzer picks.
    static func reads(of bytes: [UInt8], splits: ArraySlice<UInt8>) -> [ByteBuffer] {
        let lengths = splits.isEmpty ? [0] : Array(splits)
        var reads: [ByteBuffer] = []
        var index = 0
        var turn = 0
        while index < bytes.count {
            let control = Int(lengths[turn % lengths.count])
            turn += 1
            let length = control == 0 ? bytes.count - index : min(control, bytes.count - index)
            reads.append(ByteBuffer(bytes: bytes[index..<(index + length)]))
            index += length
        }
        return reads
    }
}
