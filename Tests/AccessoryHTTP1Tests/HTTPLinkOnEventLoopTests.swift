import AccessoryHTTP1
import AccessoryTransport
import HTTPTypes
import NIOCore
import NIOPosix
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// What only a caller that prefers the link's own executor meets (the end-to-end suite runs
/// its shared cases with both callers, see `Caller`): a consumer that blocks the loop, a large
/// body that switches from gathered to streamed, a pause before the body is claimed.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct HTTPLinkOnEventLoopTests {
    static let twoMiB = 2 * 1024 * 1024

    @Test func aConsumerThatHoldsUpTheEventLoopIsNotAnIdleDevice() async throws {
        // A consumer on the link's executor that blocks (the CLI writing to a pipe nobody reads
        // yet) stops the event loop, timers included. The device's silence cannot be judged
        // over that time: when the loop comes back, the device gets a fresh idle period.
        var configuration = testConfiguration()
        configuration.idleTimeout = .seconds(1)
        let rest = 64 * 1024
        let device = ScriptedDevice([
            [
                .readRequest, .write(Reply.head(contentLength: 10 + rest) + Array("first part".utf8)),
                // Resumes after the consumer has let go of the loop, and within an idle period.
                .sleep(milliseconds: 3500), .writeRepeated(0x61, count: rest),
            ]
        ])
        // An event loop of its own: blocking one of the shared loops would stop the timers of
        // every other test's links on it for 3 s.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { group.shutdownGracefully { _ in } }
        try await withLink(device.transport, configuration: configuration, eventLoop: group.next()) {
            (link) async throws in
            let total = try await withTaskExecutorPreference(link.taskExecutor) { () async throws -> Int in
                try await link.execute(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/slow-reader")) {
                    response in
                    var total = 0
                    for try await part in response.body {
                        if total == 0 { usleep(3_000_000) }  // blocks the event loop's thread
                        total += part.readableBytes
                    }
                    return total
                }
            }
            #expect(total == 10 + rest)
        }
    }

    @Test func largeBodyStreamsInPartsWithEveryByte() async throws {
        let device = ScriptedDevice([.largeBodyThenNext(0x61, count: Self.twoMiB)])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            let (total, parts, allA) = try await withTaskExecutorPreference(link.taskExecutor) {
                () async throws -> (Int, Int, Bool) in
                try await link.execute(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/big")) {
                    response in
                    var (total, parts, allA) = (0, 0, true)
                    for try await part in response.body {
                        total += part.readableBytes
                        parts += 1
                        allA = allA && Self.isAll(0x61, part)
                    }
                    return (total, parts, allA)
                }
            }
            #expect(total == Self.twoMiB)
            #expect(allA)
            // Larger than what is gathered before the claim (the response buffer, 1 MiB): streamed.
            #expect(parts > 1)
            #expect(try await link.fetch("/next").body == "after /next")
            #expect(device.connectionCount == 1)
        }
    }

    /// Whether every byte of `part` is `byte`, compared with `memcmp`: the consumer runs on the
    /// event loop, and a byte-by-byte check of a 1 MiB part in a debug build under AddressSanitizer
    /// held the loop long enough on a loaded CI machine for the device's 5 s write timeout to
    /// close the line (3.2 s per run on a quiet one, most of it that check).
    static func isAll(_ byte: UInt8, _ part: ByteBuffer) -> Bool {
        let pattern = [UInt8](repeating: byte, count: 4096)
        return part.withUnsafeReadableBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let length = min(pattern.count, bytes.count - offset)
                guard let base = bytes.baseAddress, memcmp(base + offset, pattern, length) == 0 else { return false }
                offset += length
            }
            return true
        }
    }

    /// The consumer pauses before it claims the body: what is gathered meanwhile is bounded.
    @Test func slowConsumerBeforeItsFirstPartBoundsWhatTheDeviceCanWrite() async throws {
        let total = 64 * 1024 * 1024
        let device = ScriptedDevice(
            ioTimeoutSeconds: 10,
            script: { _ in .largeBodyThenNext(0x63, count: total) }
        )
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            // The consumer pauses before its first part: the device must be held back meanwhile.
            let writtenBeforeClaim = Atomic<Int>(0)
            let read = try await withTaskExecutorPreference(link.taskExecutor) { () async throws -> Int in
                try await link.execute(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/huge")) {
                    response in
                    try await Task.sleep(for: .milliseconds(500))
                    writtenBeforeClaim.store(device.connections.first?.written ?? 0, ordering: .relaxed)
                    var read = 0
                    for try await part in response.body { read += part.readableBytes }
                    return read
                }
            }
            #expect(read == total)
            let written = writtenBeforeClaim.load(ordering: .relaxed)
            #expect(written > 0)
            #expect(written < 16 * 1024 * 1024, "the device wrote \(written) bytes while the consumer paused")
            #expect(try await link.fetch("/next").body == "after /next")
        }
    }
}
