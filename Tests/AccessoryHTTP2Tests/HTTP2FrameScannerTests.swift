import NIOCore
import Testing

@testable import AccessoryHTTP2

/// `-v`'s HTTP/2 frame lines, from frames built byte by byte after RFC 9113 §4.1 and §6.
@Suite("HTTP/2 frame trace")
struct HTTP2FrameScannerTests {
    static func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
        let length = payload.count
        return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags]
            + [UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)]
            + payload
    }

    static func word(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    static let client: [UInt8] =
        HTTP2FrameScanner.preface
        + frame(0x4, stream: 0, [0x00, 0x02] + word(0) + [0x00, 0x04] + word(4_194_304))
        + frame(0x8, stream: 0, word(8_323_073))
        + frame(0x1, flags: 0x5, stream: 1, [0x82, 0x86, 0x84, 0x41, 0x8A])
        + frame(0x0, stream: 1, [1, 2, 3])
        + frame(0x0, flags: 0x1, stream: 1, [4])

    static let clientLines = [
        "preface",
        "SETTINGS stream=0 len=12 ENABLE_PUSH=0 INITIAL_WINDOW_SIZE=4194304",
        "WINDOW_UPDATE stream=0 len=4 +8323073",
        "HEADERS stream=1 len=5 END_STREAM END_HEADERS",
        "DATA stream=1 len=3",
        "DATA stream=1 len=1 END_STREAM",
    ]

    @Test func aClientsFramesWholeAndByteByByte() {
        var whole = HTTP2FrameScanner(client: true)
        #expect(whole.scan(ByteBuffer(bytes: Self.client)) == Self.clientLines)
        var split = HTTP2FrameScanner(client: true)
        var lines: [String] = []
        for byte in Self.client { lines += split.scan(ByteBuffer(bytes: [byte])) }
        #expect(lines == Self.clientLines)
    }

    @Test func aServersControlFramesAreSpelledOut() {
        var scanner = HTTP2FrameScanner(client: false)
        let bytes =
            Self.frame(0x4, flags: 0x1, stream: 0, [])
            + Self.frame(0x3, stream: 3, Self.word(0x8))
            + Self.frame(0x7, stream: 0, Self.word(5) + Self.word(0) + Array("bye".utf8))
            + Self.frame(0x6, flags: 0x1, stream: 0, [1, 2, 3, 4, 5, 6, 7, 0xAB])
            + Self.frame(0x0, stream: 1, Array(repeating: 0, count: 40_000))
            + Self.frame(0x2A, stream: 7, [9])
        #expect(
            scanner.scan(ByteBuffer(bytes: bytes)) == [
                "SETTINGS stream=0 len=0 ACK",
                "RST_STREAM stream=3 len=4 CANCEL",
                "GOAWAY stream=0 len=11 last_stream=5 NO_ERROR \"bye\"",
                "PING stream=0 len=8 ACK opaque=01020304050607ab",
                "DATA stream=1 len=40000",
                "type 0x2a stream=7 len=1",
            ]
        )
    }
}
