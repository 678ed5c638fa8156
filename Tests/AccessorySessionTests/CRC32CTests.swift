import Testing

@testable import AccessorySession

/// `CRC32C.checksum` and `update` (the CPU's instructions: on x86-64 with VPCLMULQDQ, a
/// carry-less-multiply folding kernel from 128 bytes on) against the tables and the bitwise
/// definition, over every length either side of the folding kernels' threshold and their 32-,
/// 64- and 256-byte steps, misaligned, long, and in pieces; and every kernel this CPU runs
/// against the CRC instruction alone, across the 256-bit kernel's 7 KiB hybrid blocks.
@Suite("CRC-32C paths")
struct CRC32CTests {
    @Test("every length 0...4200 at offsets 0...7 against the tables; up to 320 also bitwise")
    func everyLength() {
        var generator = SeededGenerator()
        let bytes = generator.bytes(4200 + 8)
        var mismatches: [String] = []
        bytes.withUnsafeBytes { raw in
            for offset in 0..<8 {
                for length in 0...4200 {
                    let slice = UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + length)])
                    let crc = CRC32C.checksum(slice)
                    if crc != CRC32C.updateWithTables(0, slice)
                        || (length <= 320 && crc != FrameTests.bitwise(Array(slice)))
                    {
                        mismatches.append("offset \(offset), length \(length)")
                    }
                }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(10)) (\(mismatches.count) in all), seed \(generator.seed)")
    }

    @Test("random lengths up to 200 000 at random offsets, from random CRCs, with every kernel")
    func longBuffers() {
        var generator = SeededGenerator()
        let bytes = generator.bytes(200_000 + 64)
        bytes.withUnsafeBytes { raw in
            for _ in 0..<40 {
                let length = Int.random(in: 0...200_000, using: &generator)
                let offset = Int.random(in: 0..<64, using: &generator)
                let start = UInt32.random(in: .min ... .max, using: &generator)
                let slice = UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + length)])
                let expected = CRC32C.updateWithTables(start, slice)
                #expect(
                    CRC32C.update(start, slice) == expected,
                    "offset \(offset), length \(length), from \(start), seed \(generator.seed)"
                )
                for kernel in CRC32C.hardwareKernels {
                    #expect(
                        CRC32C.update(kernel: kernel, start, slice) == expected,
                        "kernel \(kernel), offset \(offset), length \(length), from \(start), seed \(generator.seed)"
                    )
                }
            }
        }
    }

    /// The instruction alone is checked against the tables above; each folding kernel is checked
    /// against it here, at every length around the steps where its paths change: the folding
    /// threshold (128), the 256-byte steps, one, two and three hybrid blocks (7 KiB each) and a
    /// 16 KiB frame's payload with its header.
    @Test(
        "every kernel this CPU runs equals the CRC instruction alone, across its blocks",
        .enabled(if: CRC32C.hardwareKernels.count > 1, "this CPU runs no folding kernel")
    )
    func everyKernel() {
        var generator = SeededGenerator()
        let bytes = generator.bytes(3 * 7168 + 600)
        let lengths =
            Array(0...1100) + Array(7000...7400) + Array(14200...14500) + Array(16300...16500)
            + Array(21300...21600)
        var mismatches: [String] = []
        bytes.withUnsafeBytes { raw in
            for kernel in CRC32C.hardwareKernels.dropFirst() {
                for offset in 0..<8 {
                    let start = UInt32.random(in: .min ... .max, using: &generator)
                    for length in lengths {
                        let slice = UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + length)])
                        let alone = CRC32C.update(kernel: CRC32C.hardwareKernels[0], start, slice)
                        if CRC32C.update(kernel: kernel, start, slice) != alone {
                            mismatches.append("kernel \(kernel), offset \(offset), length \(length)")
                        }
                    }
                }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(10)) (\(mismatches.count) in all), seed \(generator.seed)")
    }

    @Test("update over pieces split at random points equals the checksum of the whole")
    func chained() {
        var generator = SeededGenerator()
        var mismatches: [String] = []
        for _ in 0..<200 {
            let length = Int.random(in: 0...(Bool.random(using: &generator) ? 2_000 : 70_000), using: &generator)
            let bytes = generator.bytes(length)
            let cuts = (0..<Int.random(in: 1...4, using: &generator)).map { _ in
                Int.random(in: 0...length, using: &generator)
            }
            let bounds = [0] + cuts.sorted() + [length]
            bytes.withUnsafeBytes { raw in
                var crc: UInt32 = 0
                for (from, to) in zip(bounds, bounds.dropFirst()) {
                    crc = CRC32C.update(crc, UnsafeRawBufferPointer(rebasing: raw[from..<to]))
                }
                if crc != CRC32C.checksum(raw) || crc != CRC32C.updateWithTables(0, raw) {
                    mismatches.append("length \(length), cut at \(cuts.sorted())")
                }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(10)) (\(mismatches.count) in all), seed \(generator.seed)")
    }
}

/// SplitMix64 from a random seed, which failures print: `SeededGenerator(seed:)` replays one.
private struct SeededGenerator: RandomNumberGenerator {
    let seed: UInt64
    private var state: UInt64

    init(seed: UInt64 = .random(in: .min ... .max)) {
        self.seed = seed
        self.state = seed
    }

    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func bytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8(truncatingIfNeeded: self.next()) }
    }
}
