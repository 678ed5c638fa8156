import NIOCore
import Testing

@testable import AccessorySession

/// The frame layout and CRC against docs/framing.md, byte for byte.
@Suite("session frames")
struct FrameTests {
    @Test("CRC-32C check value and slicing-by-8 against the bitwise definition")
    func crc() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        var generator = SystemRandomNumberGenerator()
        for length in [0, 1, 7, 8, 9, 15, 16, 17, 100, 767, 768, 1000, 12287, 12288, 12289, 16384, 40000] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(CRC32C.checksum(bytes) == Self.bitwise(bytes), "length \(length)")
            bytes.withUnsafeBytes { raw in
                #expect(CRC32C.updateWithTables(0, raw) == Self.bitwise(bytes), "tables, length \(length)")
            }
        }
    }

    static func bitwise(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = (crc >> 1) ^ (0x82F6_3B78 & (0 &- (crc & 1))) }
        }
        return ~crc
    }

    @Test("HELLO encodes exactly as the example in docs/framing.md §7")
    func helloExample() {
        var out = ByteBuffer()
        SessionFrame(
            .hello,
            nonce: 0x0123_4567_89AB_CDEF,
            sequence: 0,
            payload: SessionFrame.handshakePayload(version: 1, maxFrame: 16384)
        ).encode(into: &out)
        let hex = out.readableBytesView.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined(separator: " ")
        #expect(
            hex == "ac ce 55 ed 01 01 00 00 01 23 45 67 89 ab cd ef 00 00 00 00 00 00 00 08 d8 8f 12 32 "
                + "01 00 00 00 00 00 40 00 a8 f9 11 8f"
        )
    }

    @Test("a frame split into 1-byte reads is read whole; damage is named")
    func splitAndDamage() throws {
        var out = ByteBuffer()
        let payload = ByteBuffer(string: "GET /status HTTP/1.1\r\n\r\n")
        SessionFrame(.data, nonce: 7, sequence: 3, payload: payload).encode(into: &out)
        var reader = SessionFrameReader()
        let bytes = Array(out.readableBytesView)
        for (index, byte) in bytes.enumerated() {
            reader.append(ByteBuffer(bytes: [byte]))
            let next = reader.next()
            if index < bytes.count - 1 {
                guard case .needMoreBytes = next else {
                    Issue.record("byte \(index): \(next)")
                    return
                }
            } else {
                guard case .frame(let frame) = next else {
                    Issue.record("last byte: \(next)")
                    return
                }
                #expect(frame.kind == .data && frame.nonce == 7 && frame.sequence == 3 && frame.payload == payload)
            }
        }
        for (offset, problem) in [
            (0, SessionFrameReader.Problem.badMagic), (4, .badFormat(0x01 ^ 0x40)), (9, .badHeaderCRC),
            (30, .badFrameCRC),
        ] {
            var damaged = bytes
            damaged[offset] ^= 0x40
            var reader = SessionFrameReader()
            reader.append(ByteBuffer(bytes: damaged))
            guard case .invalid(let found) = reader.next() else {
                Issue.record("damage at \(offset) not found")
                continue
            }
            #expect(found == problem, "damage at \(offset)")
        }
    }

    @Test("scanning skips garbage and stale frames to the next valid frame")
    func scanning() {
        var stream = ByteBuffer(bytes: [0xAC, 0xCE, 0x00, 0x41, 0xAC])
        SessionFrame(.data, nonce: 1, sequence: 0, payload: ByteBuffer(string: "old")).encode(into: &stream)
        stream.writeBytes([0xAC, 0xCE, 0x55])
        SessionFrame(
            .helloAck,
            nonce: 2,
            sequence: 0,
            payload: SessionFrame.handshakePayload(version: 1, maxFrame: 4096)
        )
        .encode(into: &stream)
        var reader = SessionFrameReader()
        reader.append(stream)
        #expect(reader.nextScanning()?.nonce == 1)
        let ack = reader.nextScanning()
        #expect(ack?.kind == .helloAck && ack?.nonce == 2)
        #expect(reader.nextScanning() == nil)
    }

    @Test("DATA frames laid out in pooled buffers are byte for byte the frames docs/framing.md defines")
    func dataFramesInPooledBuffers() {
        var generator = SystemRandomNumberGenerator()
        for size in [0, 1, 4095, 4096, 16_352, 16_353, 65_536, 200_001] {
            let payload = ByteBuffer(bytes: (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) })
            for maxFrame in [64, 1024, SessionFrame.maxFrameSize] {
                var sequence: UInt32 = 41
                var traced: [SessionFrame] = []
                let encoder = DataFrameEncoder(nonce: 9, maxPayload: maxFrame - SessionFrame.overhead)
                var pool = DataFrameEncoder.makePool()
                let buffers = encoder.encode(payload, sequence: &sequence, pool: &pool) { traced.append($0) }
                var written = ByteBuffer()
                for buffer in buffers { written.writeImmutableBuffer(buffer) }
                var expected = ByteBuffer()
                for frame in traced { frame.encode(into: &expected) }
                #expect(written == expected, "\(size) bytes in frames of \(maxFrame)")
                #expect(sequence == 41 + UInt32(traced.count))
                #expect(traced.allSatisfy { $0.payload.readableBytes <= maxFrame - SessionFrame.overhead })
                #expect(traced.map(\.sequence) == (0..<traced.count).map { 41 + UInt32($0) })
                var joined = ByteBuffer()
                for frame in traced { joined.writeImmutableBuffer(frame.payload) }
                #expect(joined == payload)
            }
        }
    }

    @Test("frames come out whole whatever reads they arrive in")
    func framesAcrossAnyReads() {
        var generator = SystemRandomNumberGenerator()
        var stream = ByteBuffer()
        var payloads: [ByteBuffer] = []
        for index in 0..<40 {
            let size = [0, 7, 900, 16_352][index % 4] + Int.random(in: 0...3, using: &generator) % 2
            let payload = ByteBuffer(bytes: (0..<min(size, 16_352)).map { UInt8(truncatingIfNeeded: $0 &+ index) })
            payloads.append(payload)
            SessionFrame(.data, nonce: 5, sequence: UInt32(index), payload: payload).encode(into: &stream)
        }
        for _ in 0..<16 {
            var reader = SessionFrameReader()
            var rest = stream
            var got: [ByteBuffer] = []
            while rest.readableBytes > 0 {
                let length = min(rest.readableBytes, Int.random(in: 1...70_000, using: &generator))
                reader.append(rest.readSlice(length: length) ?? ByteBuffer())
                while case .frame(let frame) = reader.next() { got.append(frame.payload) }
            }
            #expect(got == payloads)
            #expect(reader.bufferedBytes == 0)
        }
    }

    /// A serial line hands bytes over a few at a time: each byte of a frame is copied once, not
    /// once per read (every read used to copy all of the frame so far: quadratic).
    @Test("frames arriving in 1-byte reads are copied once")
    func smallReadsCopyLinearly() {
        var stream = ByteBuffer()
        let payload = ByteBuffer(repeating: 0x5A, count: SessionFrame.maxPayload)
        for sequence in 0..<4 {
            SessionFrame(.data, nonce: 3, sequence: UInt32(sequence), payload: payload).encode(into: &stream)
        }
        var reader = SessionFrameReader()
        var frames = 0
        for byte in stream.readableBytesView {
            reader.append(ByteBuffer(bytes: [byte]))
            while case .frame(let frame) = reader.next() {
                #expect(frame.payload == payload)
                frames += 1
            }
        }
        #expect(frames == 4)
        #expect(
            reader.copiedBytes <= 2 * stream.readableBytes,
            "\(reader.copiedBytes) bytes copied for \(stream.readableBytes)"
        )
    }
}
