import CCRC32C

/// CRC-32C (Castagnoli), as docs/framing.md §1 specifies it: reflected polynomial `0x82F63B78`,
/// initial value and final XOR `0xFFFFFFFF`; the CRC of `"123456789"` is `0xE3069283`.
///
/// A frame's CRC is computed over every byte a session carries, so it must stay far below the
/// cost of moving those bytes: the CPU's CRC-32C instruction where there is one (x86-64 SSE4.2,
/// ARMv8; module CCRC32C), slicing-by-8 tables (eight 256-entry tables, eight bytes per step)
/// elsewhere. On x86-64 CPUs with VPCLMULQDQ, buffers of 128 bytes or more are folded with
/// carry-less multiplies instead, 256 bytes a step, and the instruction finishes them: on 512-bit
/// registers with AVX-512 (about 59 GB/s against the instruction's 27 GB/s for a 16 KiB payload
/// on a Zen 4), on 256-bit registers with AVX2 alone, where the folding runs beside three
/// chains of the instruction (33 GB/s against 23 on a Zen 3).
public enum CRC32C {
    /// Whether the CPU's instructions are used (the kernel is chosen in CCRC32C).
    public static let usesHardware = ccrc32c_hardware_available() != 0

    /// The CCRC32C kernels this CPU runs (`CCRC32C_KERNEL_…`), the fastest last; empty without
    /// the CRC-32C instruction. Tests check each of them.
    static let hardwareKernels: [Int32] = (0..<32).filter { ccrc32c_kernels() & (1 << $0) != 0 }

    /// ``update(_:_:)`` with one of ``hardwareKernels``.
    static func update(kernel: Int32, _ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress else { return crc }
        return ~ccrc32c_kernel_update(kernel, ~crc, base, bytes.count)
    }

    /// The CRC-32C of `bytes`.
    public static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        self.update(0, bytes)
    }

    /// The CRC-32C of `bytes`, continuing from `crc` (the CRC of what came before them; 0 to
    /// start): `update(update(0, a), b) == checksum(a + b)`.
    public static func update(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        if Self.usesHardware {
            guard let base = bytes.baseAddress else { return crc }
            return ~ccrc32c_hardware_update(~crc, base, bytes.count)
        }
        return self.updateWithTables(crc, bytes)
    }

    /// The table-driven version (also what the tests compare the instruction against).
    static func updateWithTables(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc = ~crc
        var index = 0
        let count = bytes.count
        Self.tables.withUnsafeBufferPointer { table in
            while count - index >= 8 {
                let low = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: index, as: UInt32.self)) ^ crc
                let high = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: index + 4, as: UInt32.self))
                crc =
                    table[7 * 256 + Int(low & 0xFF)] ^ table[6 * 256 + Int((low >> 8) & 0xFF)]
                    ^ table[5 * 256 + Int((low >> 16) & 0xFF)] ^ table[4 * 256 + Int(low >> 24)]
                    ^ table[3 * 256 + Int(high & 0xFF)] ^ table[2 * 256 + Int((high >> 8) & 0xFF)]
                    ^ table[1 * 256 + Int((high >> 16) & 0xFF)] ^ table[Int(high >> 24)]
                index += 8
            }
            while index < count {
                crc = table[Int((crc ^ UInt32(bytes[index])) & 0xFF)] ^ (crc >> 8)
                index += 1
            }
        }
        return ~crc
    }

    /// The CRC-32C of `bytes`.
    public static func checksum(_ bytes: some Sequence<UInt8>) -> UInt32 {
        let array = Array(bytes)
        return array.withUnsafeBytes { self.checksum($0) }
    }

    /// Table k maps a byte to its CRC contribution k bytes further on.
    private static let tables: [UInt32] = {
        var tables = [UInt32](repeating: 0, count: 8 * 256)
        for byte in 0..<256 {
            var crc = UInt32(byte)
            for _ in 0..<8 { crc = (crc >> 1) ^ (0x82F6_3B78 & (0 &- (crc & 1))) }
            tables[byte] = crc
        }
        for byte in 0..<256 {
            for slice in 1..<8 {
                let previous = tables[(slice - 1) * 256 + byte]
                tables[slice * 256 + byte] = (previous >> 8) ^ tables[Int(previous & 0xFF)]
            }
        }
        return tables
    }()
}
