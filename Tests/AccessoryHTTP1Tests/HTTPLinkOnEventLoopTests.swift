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

/// The same link, driven by a caller that prefers the link's own executor (as
/// `AccessoryClient.data` and latency-sensitive callers do). Such a caller starts exchanges
/// without a hop and claims each body only after the read that carried the head: a small body
/// then arrives as one buffer, a large one switches to streaming. Both must behave exactly like
/// the streamed path: same bytes, same errors, same back-pressure, same recovery.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct HTTPLinkOnEventLoopTests {
    static let twoMiB = 2 * 1024 * 1024

    @Test func keepAliveCarriesSmallBodiesOfEveryFraming() async throws {
        let device = ScriptedDevice([
            [
                .readRequest, .write(Reply.ok("one")),
                .readRequest, .write(Reply.chunked(["tw", "o"])),
                .readRequest, .write(Reply.ok("")),
                .readRequest, .write(Reply.ok("four")),
            ]
        ])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            let bodies = try await withTaskExecutorPreference(link.taskExecutor) { () async throws -> [String] in
                var bodies: [String] = []
                for path in ["/1", "/2", "/3", "/4"] {
                    #expect(link.taskExecutor.eventLoop.inEventLoop)
                    bodies.append(try await link.fetch(path).body)
                }
                return bodies
            }
            #expect(bodies == ["one", "two", "", "four"])
            #expect(device.connectionCount == 1)
            #expect(link.openCount == 1)
        }
        #expect(await device.waitUntilFinished())
        #expect(device.problems == [])
    }

    @Test func truncatedBodyFailsAndTheNextRequestReopens() async throws {
        let device = ScriptedDevice([
            [.readRequest, .write(Reply.head(contentLength: 100) + Array("only ten b".utf8)), .close],
            [.readRequest, .respond { Reply.ok("ok " + $0.path) }],
        ])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            try await withTaskExecutorPreference(link.taskExecutor) { () async throws in
                #expect(await linkErrorCode { _ = try await link.fetch("/bad") } == .linkClosed)
                #expect(try await link.fetch("/next").body == "ok /next")
            }
            #expect(link.openCount == 2)
        }
    }

    @Test func deviceStopsSendingMidBodyTimesOut() async throws {
        var configuration = testConfiguration()
        configuration.idleTimeout = .milliseconds(300)
        let device = ScriptedDevice([
            [
                .readRequest, .write(Reply.head(contentLength: 100) + Array("ten bytes!".utf8)),
                .sleep(milliseconds: 2000),
            ],
            [.readRequest, .respond { Reply.ok("ok " + $0.path) }],
        ])
        try await withLink(device.transport, configuration: configuration) { (link) async throws in
            try await withTaskExecutorPreference(link.taskExecutor) { () async throws in
                #expect(await linkErrorCode { _ = try await link.fetch("/slow") } == .idleTimeout)
                #expect(try await link.fetch("/next").body == "ok /next")
            }
        }
    }

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
                        allA = allA && part.readableBytesView.allSatisfy { $0 == 0x61 }
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

    @Test func consumerReturnsWithoutReadingIsDrained() async throws {
        let device = ScriptedDevice([.largeBodyThenNext(0x61, count: Self.twoMiB)])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            try await withTaskExecutorPreference(link.taskExecutor) { () async throws in
                let status = try await link.execute(
                    HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/big")
                ) {
                    $0.head.status.code
                }
                #expect(status == 200)
                #expect(try await link.fetch("/next").body == "after /next")
            }
            #expect(device.connectionCount == 1)
        }
    }

    @Test func slowConsumerBoundsWhatTheDeviceCanWrite() async throws {
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
