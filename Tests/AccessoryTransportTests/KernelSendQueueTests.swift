import AccessoryTransport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// What `KernelSendQueue` reports, per kind of descriptor: the session opener tells a slow
/// device from a dead one by it (docs/framing.md §4).
@Suite struct KernelSendQueueTests {
    /// A pipe reports exactly the bytes its reader has not taken; 0 once it took them.
    @Test func aPipeReportsWhatItsReaderHasNotTaken() throws {
        var ends: [CInt] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { ends.forEach { close($0) } }
        let queue = try #require(KernelSendQueue(descriptor: ends[1]))
        #expect(queue.unsentBytes() == 0)
        let bytes = [UInt8](repeating: 7, count: 3000)
        #expect(bytes.withUnsafeBytes { write(ends[1], $0.baseAddress, $0.count) } == 3000)
        #expect(queue.unsentBytes() == 3000)
        var sink = [UInt8](repeating: 0, count: 4096)
        #expect(sink.withUnsafeMutableBytes { read(ends[0], $0.baseAddress, $0.count) } == 3000)
        #expect(queue.unsentBytes() == 0)
    }

    /// A unix socket reports at least the bytes its peer has not read (the kernel counts its
    /// buffers' bookkeeping too, never less), and 0 once the peer read them all.
    @Test func aSocketReportsAtLeastWhatItsPeerHasNotRead() throws {
        let (mine, peer) = try SocketPairTransport.makeSocketPair()
        defer {
            close(mine)
            close(peer)
        }
        let queue = try #require(KernelSendQueue(descriptor: mine))
        #expect(queue.unsentBytes() == 0)
        let bytes = [UInt8](repeating: 7, count: 3000)
        #expect(bytes.withUnsafeBytes { write(mine, $0.baseAddress, $0.count) } == 3000)
        #expect((queue.unsentBytes() ?? 0) >= 3000)
        var sink = [UInt8](repeating: 0, count: 4096)
        #expect(sink.withUnsafeMutableBytes { read(peer, $0.baseAddress, $0.count) } == 3000)
        #expect(queue.unsentBytes() == 0)
    }

    /// A queue the transport counts (a USB link's OUT transfers not back) reports its count as
    /// it is when asked, not as it was when the queue was made.
    @Test func aCountedQueueReportsTheCountWhenAsked() {
        let unsent = Mutex(0)
        let queue = KernelSendQueue(counting: { unsent.withLock { $0 } })
        #expect(queue.unsentBytes() == 0)
        unsent.withLock { $0 = 49_152 }
        #expect(queue.unsentBytes() == 49_152)
        unsent.withLock { $0 = 0 }
        #expect(queue.unsentBytes() == 0)
    }

    /// A regular file has no queue to report.
    @Test func aRegularFileHasNone() throws {
        let path = NSTemporaryDirectory() + "ksq-\(UUID().uuidString)"
        let descriptor = open(path, O_CREAT | O_RDWR, 0o600)
        #expect(descriptor >= 0)
        defer {
            close(descriptor)
            unlink(path)
        }
        #expect(KernelSendQueue(descriptor: descriptor) == nil)
    }
}
