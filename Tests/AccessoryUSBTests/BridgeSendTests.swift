import Testing

@testable import AccessoryUSB

#if canImport(Glibc)
    import Glibc
#endif

/// The bridge's gathering send (`USBLinkBridge.sendAll`): however short the kernel cuts the
/// sends, every byte of every completed transfer goes once and in order.
@Suite("USB bridge: gathering send")
struct BridgeSendTests {
    @Test(arguments: [[1], [5, 16_383, 2, 7_000], [16_384], [24_385], [3, 16_382, 1, 1, 100_000]])
    func shortSendsResumeWhereTheyStopped(cuts: [Int]) {
        let sizes = [16_384, 1, 8_000]
        let buffers = sizes.enumerated().map { index, size in
            let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: size)
            for offset in 0..<size { buffer[offset] = UInt8(truncatingIfNeeded: offset &* 7 &+ index &* 31) }
            return buffer
        }
        defer { for buffer in buffers { buffer.deallocate() } }
        var expected: [UInt8] = []
        for (buffer, size) in zip(buffers, sizes) { expected += UnsafeBufferPointer(start: buffer, count: size) }

        var vectors = zip(buffers, sizes).map { iovec(iov_base: UnsafeMutableRawPointer($0), iov_len: $1) }
        var received: [UInt8] = []
        var calls = 0
        // A send that takes at most the next cut's bytes (the cuts repeat), gathering in order.
        let sent = USBLinkBridge.sendAll(&vectors) { first, count in
            var allowed = cuts[calls % cuts.count]
            calls += 1
            var taken = 0
            for index in 0..<count where allowed > 0 {
                let vector = first[index]
                let take = min(allowed, vector.iov_len)
                guard let base = vector.iov_base else { break }
                received += UnsafeRawBufferPointer(start: base, count: take)
                taken += take
                allowed -= take
            }
            return taken
        }
        #expect(sent)
        #expect(vectors.isEmpty)
        #expect(received.count == expected.count)
        #expect(received == expected)
    }

    @Test func aSendThatTakesNothingFails() {
        let byte = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
        defer { byte.deallocate() }
        var vectors = [iovec(iov_base: UnsafeMutableRawPointer(byte), iov_len: 1)]
        #expect(!USBLinkBridge.sendAll(&vectors) { _, _ in 0 })
    }
}
