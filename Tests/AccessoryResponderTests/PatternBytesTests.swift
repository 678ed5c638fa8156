import NIOCore
import Testing

@testable import AccessoryEmulator

/// The `/bytes` and `/stream` bodies are windows of one precomputed source (the hot path of
/// bulk transfers); these pin them to ``EmulatedAccessory/patternByte(at:)``.
@Suite("Pattern bytes")
struct PatternBytesTests {
    static func reference(_ offset: Int, _ count: Int) -> [UInt8] {
        (offset..<(offset + count)).map { EmulatedAccessory.patternByte(at: $0) }
    }

    @Test("patternBytes and patternBuffer match patternByte(at:), inside one block and across blocks")
    func matchesDefinition() {
        let block = 64 * 1024
        let cases: [(Int, Int)] = [
            (0, 0), (0, 1), (0, block), (1, block - 1), (block - 3, 7), (5 * block, block),
            (255 * block + 100, 3 * block), (256 * block, block), (1_000_003, 300_000), ((8 << 30) - block, block),
        ]
        for (offset, count) in cases {
            let expected = Self.reference(offset, count)
            #expect(
                EmulatedAccessory.patternBytes(offset: offset, count: count) == expected,
                "bytes \(offset)+\(count)"
            )
            let buffer = EmulatedAccessory.patternBuffer(offset: offset, count: count)
            #expect(Array(buffer.readableBytesView) == expected, "buffer \(offset)+\(count)")
        }
    }

    @Test("every block constant (256 blocks, one full period) is a window of the source")
    func everyBlock() {
        let block = 64 * 1024
        for index in 0..<256 {
            let offset = index * block
            let buffer = EmulatedAccessory.patternBuffer(offset: offset, count: 512)
            #expect(Array(buffer.readableBytesView) == Self.reference(offset, 512), "block \(index)")
        }
    }
}
