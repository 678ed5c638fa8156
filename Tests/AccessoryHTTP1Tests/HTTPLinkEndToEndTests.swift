import AccessoryHTTP1
import AccessoryTestSupport
import AccessoryTransport
import HTTPTypes
import NIOCore
import Synchronization
import Testing

struct Fetched: Sendable {
    let status: Int
    let body: String
    var head = HTTPResponse(status: .ok)
    var bodyBytes: [UInt8] = []
}

struct ConsumerGaveUp: Error {}

extension HTTPLink {
    func fetch(
        _ path: String,
        method: HTTPRequest.Method = .get,
        headers: HTTPFields = [:],
        body: HTTPRequestBody = .none,
        limit: Int = 1 << 20
    ) async throws -> Fetched {
        var request = HTTPRequest(method: method, scheme: nil, authority: nil, path: path)
        request.headerFields = headers
        return try await self.execute(request, body: body) { response in
            let bytes = try await response.body.collect(upTo: limit)
            return Fetched(
                status: response.head.status.code,
                body: String(buffer: bytes),
                head: response.head,
                bodyBytes: Array(bytes.readableBytesView)
            )
        }
    }
}

/// Runs `body` and returns the link error code it threw (nil if it did not throw one).
func linkErrorCode(_ body: () async throws -> Void) async -> HTTPLinkError.Code? {
    do {
        try await body()
        Issue.record("expected an HTTPLinkError")
        return nil
    } catch let error as HTTPLinkError {
        return error.code
    } catch {
        Issue.record("expected an HTTPLinkError, got \(error)")
        return nil
    }
}

/// Runs `body` with a link over `transport` and always shuts the link down (and waits until
/// the transport has let go), also when `body` throws: a failed `#require` included.
func withLink(
    _ transport: any ByteStreamTransport,
    configuration: LinkConfiguration = testConfiguration(),
    eventLoop: (any EventLoop)? = nil,
    _ body: (HTTPLink) async throws -> Void
) async throws {
    let link =
        if let eventLoop {
            HTTPLink(transport: transport, configuration: configuration, eventLoop: eventLoop)
        } else {
            HTTPLink(transport: transport, configuration: configuration)
        }
    do {
        try await body(link)
        await link.shutdown()
    } catch {
        await link.shutdown()
        throw error
    }
}

/// Who calls the link. The link takes two paths: a caller on any executor gets each body as a
/// stream from the start; a caller that prefers the link's executor (as `AccessoryClient.data`
/// does) starts without a hop and claims the body after the read that carried the head, so a
/// small body arrives whole and a large one switches to streaming. Both must behave alike: same
/// bytes, same errors, same back-pressure, same recovery.
enum Caller: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case anyExecutor
    case linkExecutor

    var testDescription: String { self.rawValue }

    func run<T: Sendable>(_ link: HTTPLink, _ body: () async throws -> T) async throws -> T {
        switch self {
        case .anyExecutor:
            return try await body()
        case .linkExecutor:
            return try await withTaskExecutorPreference(link.taskExecutor) {
                #expect(link.taskExecutor.eventLoop.inEventLoop)
                return try await body()
            }
        }
    }
}

func testConfiguration() -> LinkConfiguration {
    var configuration = LinkConfiguration()
    // Stretched under a sanitizer: a scripted device's 300 ms pause once took over 3 s there.
    configuration.openTimeout = TimeBounds.scaled(.seconds(3))
    configuration.idleTimeout = TimeBounds.scaled(.seconds(3))
    configuration.drainTimeout = TimeBounds.scaled(.seconds(3))
    return configuration
}

/// Opens `link` with an exchange of its own (the device's script starts with ``warmUpSteps``),
/// for tests whose first request has a short deadline: a request's deadline also bounds the open
/// it waits for, which a loaded, sanitized run can stretch past 100 ms.
func warmUp(_ link: HTTPLink) async throws {
    #expect(try await link.fetch("/warm-up").body == "ok /warm-up")
}

/// The device's side of ``warmUp(_:)``.
let warmUpSteps: [DeviceStep] = [.readRequest, .respond { Reply.ok("ok " + $0.path) }]

/// Everything over a real socketpair, against a device that follows a script.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct HTTPLinkEndToEndTests {
    let ok: [DeviceStep] = [.readRequest, .respond { Reply.ok("ok " + $0.path) }]

    // MARK: Keep-alive

    @Test(arguments: Caller.allCases) func keepAliveCarriesEveryFraming(caller: Caller) async throws {
        let device = ScriptedDevice([
            [
                .readRequest, .write(Reply.ok("one")),
                .readRequest, .write(Reply.chunked(["tw", "", "o"].filter { !$0.isEmpty })),
                .readRequest, .write(Reply.chunked(["th", "ree"], headers: ["X-A: b"])),
                .readRequest, .write(Reply.ok("")),
            ]
        ])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            let bodies = try await caller.run(link) { () async throws -> [String] in
                var bodies: [String] = []
                for path in ["/1", "/2", "/3", "/4"] { bodies.append(try await link.fetch(path).body) }
                return bodies
            }
            #expect(bodies == ["one", "two", "three", ""])
            #expect(device.connectionCount == 1)
            #expect(link.openCount == 1)
            #expect(device.allRequests.map(\.path) == ["/1", "/2", "/3", "/4"])
            #expect(device.allRequests.allSatisfy { $0.header("host") == "accessory" })
        }
        #expect(await device.waitUntilFinished())
        #expect(device.connections.first?.unexpected == [])
        #expect(device.problems == [])
    }

    // MARK: Malformed responses

    func expectFailureThenRecovery(
        caller: Caller,
        _ bad: [DeviceStep],
        code: HTTPLinkError.Code,
        configuration: LinkConfiguration = testConfiguration()
    ) async throws {
        let device = ScriptedDevice([bad, ok])
        try await withLink(device.transport, configuration: configuration) { (link) async throws in
            let next = try await caller.run(link) { () async throws -> Fetched in
                #expect(await linkErrorCode { _ = try await link.fetch("/bad") } == code)
                return try await link.fetch("/next")
            }
            #expect(next.status == 200)
            #expect(next.body == "ok /next")
            #expect(device.connectionCount == 2)
            #expect(link.openCount == 2)
        }
    }

    @Test(arguments: Caller.allCases) func garbageInsteadOfStatusLine(caller: Caller) async throws {
        try await expectFailureThenRecovery(
            caller: caller,
            [.readRequest, .write("garbage\r\n\r\n")],
            code: .malformedResponse
        )
    }

    @Test(arguments: Caller.allCases) func truncatedBodyThenClose(caller: Caller) async throws {
        try await expectFailureThenRecovery(
            caller: caller,
            [.readRequest, .write(Reply.head(contentLength: 100) + Array("only ten b".utf8)), .close],
            code: .linkClosed
        )
    }

    @Test(arguments: Caller.allCases) func closeBeforeAnyResponse(caller: Caller) async throws {
        try await expectFailureThenRecovery(
            caller: caller,
            [.readRequest, .close],
            code: .linkClosed
        )
    }

    @Test(arguments: Caller.allCases) func oversizedHeaderBlock(caller: Caller) async throws {
        let big = String(repeating: "v", count: LinkConfiguration().limits.maxHeaderBlockSize + 10)
        try await expectFailureThenRecovery(
            caller: caller,
            [.readRequest, .write(Reply.ok("x", headers: ["X-Big: \(big)"]))],
            code: .responseTooLarge
        )
    }

    @Test(arguments: Caller.allCases) func oversizedHeaderBlockOfManySmallHeaders(caller: Caller) async throws {
        var configuration = testConfiguration()
        configuration.limits.maxHeaderCount = 10_000
        let headers = (0..<8000).map { "X-H\($0): 0123456789" }
        try await expectFailureThenRecovery(
            caller: caller,
            [.readRequest, .write(Reply.ok("x", headers: headers))],
            code: .responseTooLarge,
            configuration: configuration
        )
    }

    @Test(arguments: Caller.allCases) func tooManyHeaders(caller: Caller) async throws {
        let headers = (0...LinkConfiguration().limits.maxHeaderCount).map { "X-H\($0): v" }
        try await expectFailureThenRecovery(
            caller: caller,
            [.readRequest, .write(Reply.ok("x", headers: headers))],
            code: .responseTooLarge
        )
    }

    @Test(arguments: Caller.allCases) func overlongStatusLine(caller: Caller) async throws {
        let reason = String(repeating: "R", count: LinkConfiguration().limits.maxStartLineLength)
        try await expectFailureThenRecovery(
            caller: caller,
            [.readRequest, .write(Reply.ok("x", status: "200 \(reason)"))],
            code: .responseTooLarge
        )
    }

    @Test(arguments: Caller.allCases) func invalidChunkSize(caller: Caller) async throws {
        try await expectFailureThenRecovery(
            caller: caller,
            [.readRequest, .write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")],
            code: .malformedResponse
        )
    }

    @Test(arguments: Caller.allCases) func contentLengthAndTransferEncoding(caller: Caller) async throws {
        try await expectFailureThenRecovery(
            caller: caller,
            [
                .readRequest,
                .write(
                    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
                ),
            ],
            code: .malformedResponse
        )
    }

    @Test(arguments: Caller.allCases) func switchingProtocolsIsRefused(caller: Caller) async throws {
        try await expectFailureThenRecovery(
            caller: caller,
            [.readRequest, .write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n")],
            code: .malformedResponse
        )
    }

    @Test(arguments: Caller.allCases) func deviceStopsSendingMidBody(caller: Caller) async throws {
        var configuration = testConfiguration()
        configuration.idleTimeout = .milliseconds(300)
        let clock = ContinuousClock()
        let device = ScriptedDevice([
            [
                .readRequest, .write(Reply.head(contentLength: 100) + Array("ten bytes!".utf8)),
                .sleep(milliseconds: 2000),
            ],
            ok,
        ])
        try await withLink(device.transport, configuration: configuration) { (link) async throws in
            let (elapsed, next) = try await caller.run(link) { () async throws -> (Duration, String) in
                let elapsed = await clock.measure {
                    #expect(await linkErrorCode { _ = try await link.fetch("/slow") } == .idleTimeout)
                }
                return (elapsed, try await link.fetch("/next").body)
            }
            #expect(elapsed < .milliseconds(1500))
            #expect(next == "ok /next")
            #expect(device.connectionCount == 2)
        }
    }

    @Test func deviceSendsNoHeadAtAll() async throws {
        var configuration = testConfiguration()
        configuration.idleTimeout = .milliseconds(300)
        let device = ScriptedDevice([[.readRequest, .sleep(milliseconds: 2000)], ok])
        try await withLink(device.transport, configuration: configuration) { (link) async throws in
            #expect(await linkErrorCode { _ = try await link.fetch("/silent") } == .idleTimeout)
            #expect(try await link.fetch("/next").body == "ok /next")
        }
    }

    // MARK: Abandoned responses

    static let twoMiB = 2 * 1024 * 1024
    /// More than the link buffers for a slow consumer plus the socket buffers, so that most of
    /// it is still on the wire when the consumer gives up.
    static let sixteenMiB = 16 * 1024 * 1024

    /// Reads at least 64 KiB of the body, then throws.
    func readSomeThenThrow(_ response: HTTPLinkResponse) async throws -> Int {
        var read = 0
        for try await part in response.body {
            read += part.readableBytes
            if read >= 64 * 1024 { throw ConsumerGaveUp() }
        }
        return read
    }

    @Test func consumerThrowsMidBodyIsDrained() async throws {
        let device = ScriptedDevice([.largeBodyThenNext(0x61, count: Self.twoMiB)])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            await #expect(throws: ConsumerGaveUp.self) {
                _ = try await link.execute(
                    HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/big"),
                    self.readSomeThenThrow
                )
            }
            #expect(try await link.fetch("/next").body == "after /next")
            #expect(device.connectionCount == 1)
            #expect(link.openCount == 1)
        }
    }

    @Test(arguments: Caller.allCases) func consumerReturnsWithoutReadingIsDrained(caller: Caller) async throws {
        let device = ScriptedDevice([.largeBodyThenNext(0x61, count: Self.twoMiB)])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            let (status, next) = try await caller.run(link) { () async throws -> (UInt, String) in
                let status = try await link.execute(
                    HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/big")
                ) { $0.head.status.code }
                return (UInt(status), try await link.fetch("/next").body)
            }
            #expect(status == 200)
            #expect(next == "after /next")
            #expect(device.connectionCount == 1)
        }
    }

    @Test func bodyKeptPastTheHandlerIsDrainedAndEnds() async throws {
        // The handler returns the body unread: the link drains it while the caller still
        // holds the sequence (this used to trap in NIO: a source dropped without finish()).
        let device = ScriptedDevice([.largeBodyThenNext(0x64, count: Self.twoMiB)])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            let body = try await link.execute(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/d")) {
                $0.body
            }
            #expect(try await link.fetch("/next").body == "after /next")
            var iterator = body.makeAsyncIterator()
            _ = try? await iterator.next()
            #expect(device.connectionCount == 1)
        }
    }

    @Test func cancelledTaskMidBodyIsDrained() async throws {
        let device = ScriptedDevice([.largeBodyThenNext(0x61, count: Self.twoMiB)])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            let readEnough = Atomic<Bool>(false)
            let task = Task {
                try await link.execute(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/big")) {
                    response in
                    var read = 0
                    for try await part in response.body {
                        read += part.readableBytes
                        if read >= 64 * 1024 {
                            readEnough.store(true, ordering: .relaxed)
                            try await Task.sleep(for: .seconds(10))
                        }
                    }
                    return read
                }
            }
            #expect(await eventually { readEnough.load(ordering: .relaxed) })
            task.cancel()
            let result = await task.result
            switch result {
            case .success(let read): Issue.record("expected cancellation, read \(read)")
            case .failure(let error):
                #expect((error as? HTTPLinkError)?.code == .cancelled || error is CancellationError)
            }
            #expect(try await link.fetch("/next").body == "after /next")
            #expect(device.connectionCount == 1)
        }
    }

    @Test func cancelledBeforeHeadIsDrained() async throws {
        let device = ScriptedDevice([
            [
                .readRequest, .sleep(milliseconds: 200), .write(Reply.ok(String(repeating: "z", count: 50_000))),
                .readRequest, .respond { Reply.ok("after " + $0.path) },
            ]
        ])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            let task = Task { try await link.fetch("/slow") }
            #expect(await eventually { device.allRequests.count == 1 })
            task.cancel()
            #expect(await linkErrorCode { _ = try await task.value } == .cancelled)
            #expect(try await link.fetch("/next").body == "after /next")
            #expect(device.connectionCount == 1)
        }
    }

    @Test func abandonedAfterItEndedKeepsTheLink() async throws {
        // The whole body arrived before the consumer gave up: nothing is left to drain, so the
        // link stays in step and carries the next request.
        let device = ScriptedDevice([
            [
                .readRequest, .write(Reply.ok(String(repeating: "b", count: 100_000))),
                .readRequest, .respond { Reply.ok("after " + $0.path) },
            ]
        ])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            await #expect(throws: ConsumerGaveUp.self) {
                _ = try await link.execute(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/b")) { _ in
                    try await Task.sleep(for: .milliseconds(100))
                    throw ConsumerGaveUp()
                }
            }
            #expect(try await link.fetch("/next").body == "after /next")
            #expect(device.connectionCount == 1)
        }
    }

    @Test func deviceClosingWhileIdleIsNoticedAndTheNextRequestReopens() async throws {
        let device = ScriptedDevice([
            [.readRequest, .respond { Reply.ok("first " + $0.path) }, .close],
            [.readRequest, .respond { Reply.ok("after " + $0.path) }],
        ])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            #expect(try await link.fetch("/a").body == "first /a")
            #expect(await device.waitUntilFinished(timeout: .seconds(5)) || device.connectionCount == 1)
            try await Task.sleep(for: .milliseconds(50))
            #expect(try await link.fetch("/next").body == "after /next")
            #expect(device.connectionCount == 2)
        }
    }

    @Test func abandonedBodyOverDrainLimitReopens() async throws {
        var configuration = testConfiguration()
        configuration.drainLimit = 256 * 1024
        let device = ScriptedDevice([
            [
                .readRequest, .write(Reply.head(contentLength: Self.sixteenMiB)),
                .writeRepeated(0x61, count: Self.sixteenMiB),
            ],
            [.readRequest, .respond { Reply.ok("after " + $0.path) }],
        ])
        try await withLink(device.transport, configuration: configuration) { (link) async throws in
            await #expect(throws: ConsumerGaveUp.self) {
                _ = try await link.execute(
                    HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/big"),
                    self.readSomeThenThrow
                )
            }
            #expect(try await link.fetch("/next").body == "after /next")
            #expect(device.connectionCount == 2)
            #expect(link.openCount == 2)
        }
    }

    // MARK: Stray bytes

    @Test func strayBytesWhileIdleReopen() async throws {
        let device = ScriptedDevice([
            [
                .readRequest, .write(Reply.ok("first")), .sleep(milliseconds: 50),
                .write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale"),
            ],
            ok,
        ])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            #expect(try await link.fetch("/1").body == "first")
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await link.fetch("/2").body == "ok /2")
            #expect(device.connectionCount == 2)
        }
    }

    @Test func extraBytesRightAfterResponseReopen() async throws {
        let device = ScriptedDevice([
            [.readRequest, .write(Reply.ok("first") + Reply.ok("stale"))],
            ok,
        ])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            #expect(try await link.fetch("/1").body == "first")
            #expect(try await link.fetch("/2").body == "ok /2")
            #expect(device.connectionCount == 2)
        }
    }

    @Test func garbageRightAfterResponseReopens() async throws {
        let device = ScriptedDevice([
            [.readRequest, .write(Reply.ok("first") + Array("\u{0}\u{1}junk".utf8))],
            ok,
        ])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            #expect(try await link.fetch("/1").body == "first")
            #expect(try await link.fetch("/2").body == "ok /2")
            #expect(device.connectionCount == 2)
        }
    }

    // MARK: Expect: 100-continue

    static let expectContinue: HTTPFields = [.expect: "100-continue"]

    @Test(arguments: [false, true])
    func continueThenBody(streamed: Bool) async throws {
        let device = ScriptedDevice([
            [
                .readHead, .write("HTTP/1.1 100 Continue\r\n\r\n"), .readBody,
                .respond { Reply.ok("got " + String(decoding: $0.body, as: UTF8.self)) },
                .readRequest, .respond { Reply.ok("after " + $0.path) },
            ]
        ])
        var configuration = testConfiguration()
        configuration.expectContinueTimeout = .seconds(5)
        try await withLink(device.transport, configuration: configuration) { (link) async throws in
            let body: HTTPRequestBody =
                streamed
                ? .stream(length: 5) { try await $0.write(ByteBuffer(string: "hello")) }
                : .bytes(ByteBuffer(string: "hello"))
            let clock = ContinuousClock()
            var fetched: Fetched?
            let elapsed = try await clock.measure {
                fetched = try await link.fetch("/upload", method: .post, headers: Self.expectContinue, body: body)
            }
            #expect(fetched?.body == "got hello")
            #expect(elapsed < .seconds(2))  // released by the 100, not by the timeout
            #expect(try await link.fetch("/next").body == "after /next")
            #expect(device.connectionCount == 1)
        }
    }

    @Test(arguments: [false, true])
    func continueTimeoutSendsBodyAnyway(streamed: Bool) async throws {
        let device = ScriptedDevice([
            [
                .readHead, .readBody,
                .respond { Reply.ok("got " + String(decoding: $0.body, as: UTF8.self)) },
                .readRequest, .respond { Reply.ok("after " + $0.path) },
            ]
        ])
        var configuration = testConfiguration()
        configuration.expectContinueTimeout = .milliseconds(200)
        try await withLink(device.transport, configuration: configuration) { (link) async throws in
            let body: HTTPRequestBody =
                streamed
                ? .stream(length: 5) { try await $0.write(ByteBuffer(string: "hello")) }
                : .bytes(ByteBuffer(string: "hello"))
            #expect(
                try await link.fetch("/upload", method: .post, headers: Self.expectContinue, body: body).body
                    == "got hello"
            )
            #expect(try await link.fetch("/next").body == "after /next")
            #expect(device.connectionCount == 1)
        }
    }

    @Test(arguments: [false, true])
    func finalResponseWithoutContinueWithholdsBody(streamed: Bool) async throws {
        let device = ScriptedDevice([
            [.readHead, .write(Reply.ok("no", status: "417 Expectation Failed"))],
            ok,
        ])
        var configuration = testConfiguration()
        configuration.expectContinueTimeout = .seconds(5)
        try await withLink(device.transport, configuration: configuration) { (link) async throws in
            let body: HTTPRequestBody =
                streamed
                ? .stream(length: 5) { try await $0.write(ByteBuffer(string: "hello")) }
                : .bytes(ByteBuffer(string: "hello"))
            let first = try await link.fetch("/upload", method: .post, headers: Self.expectContinue, body: body)
            #expect(first.status == 417)
            #expect(try await link.fetch("/next").body == "ok /next")
            #expect(device.connectionCount == 2)
        }
        #expect(await device.waitUntilFinished())
        #expect(device.connections.first?.unexpected == [])
    }

    @Test func informationalAndFinalHeadInOneReadThenBinaryBody() async throws {
        // The final head arrives in the same read as a 1xx: the body that follows must not be
        // mistaken for a status line (it has no line feed in its first 8 KiB).
        let count = 20_000
        let device = ScriptedDevice([
            [
                .readRequest,
                .write(
                    "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: \(count)\r\n\r\n"
                ),
                .sleep(milliseconds: 50),
                .writeRepeated(0x62, count: count),
                .readRequest, .respond { Reply.ok("after " + $0.path) },
            ]
        ])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            let fetched = try await link.fetch("/hints")
            #expect(fetched.body == String(repeating: "b", count: count))
            #expect(try await link.fetch("/next").body == "after /next")
            #expect(device.connectionCount == 1)
        }
    }

    // MARK: Request bodies

    static func pattern(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) } }

    @Test(arguments: [nil, 100_003] as [Int?])
    func streamedRequestBody(length: Int?) async throws {
        let bytes = Self.pattern(100_003)
        let device = ScriptedDevice([
            [
                .readRequest, .respond { Reply.ok("\($0.body.count)") },
                .readRequest, .respond { Reply.ok("after " + $0.path) },
            ]
        ])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            let body = HTTPRequestBody.stream(length: length) { writer in
                var offset = 0
                for size in [1, 1000, 65_536, 30_000, 3466] {
                    try await writer.write(ByteBuffer(bytes: bytes[offset..<offset + size]))
                    offset += size
                }
            }
            #expect(try await link.fetch("/up", method: .post, body: body).body == "100003")
            #expect(try await link.fetch("/next").body == "after /next")
            let request = try #require(device.allRequests.first)
            #expect(request.body == bytes)
            if length == nil {
                #expect(request.chunked)
                #expect(request.header("content-length") == nil)
            } else {
                #expect(!request.chunked)
                #expect(request.header("content-length") == "100003")
            }
            #expect(device.connectionCount == 1)
        }
    }

    @Test func bytesRequestBody() async throws {
        let device = ScriptedDevice([[.readRequest, .respond { Reply.ok(String(decoding: $0.body, as: UTF8.self)) }]])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            #expect(
                try await link.fetch("/up", method: .put, body: .bytes(ByteBuffer(string: "payload"))).body == "payload"
            )
            #expect(device.allRequests.first?.header("content-length") == "7")
        }
    }

    @Test func failingRequestBodyReopens() async throws {
        struct SourceBroke: Error {}
        let device = ScriptedDevice([[.readHead, .sleep(milliseconds: 500)], ok])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            let body = HTTPRequestBody.stream(length: nil) { writer in
                try await writer.write(ByteBuffer(string: "part"))
                throw SourceBroke()
            }
            #expect(
                await linkErrorCode { _ = try await link.fetch("/up", method: .post, body: body) } == .requestBodyFailed
            )
            #expect(try await link.fetch("/next").body == "ok /next")
            #expect(device.connectionCount == 2)
        }
    }

    // MARK: Delimiting

    @Test func headResponseHasNoBody() async throws {
        let device = ScriptedDevice([
            [
                .readRequest, .write(Reply.head(contentLength: 1000)),
                .readRequest, .respond { Reply.ok("after " + $0.path) },
            ]
        ])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            let head = try await link.fetch("/h", method: .head)
            #expect(head.status == 200)
            #expect(head.body == "")
            #expect(try await link.fetch("/next").body == "after /next")
            #expect(device.connectionCount == 1)
        }
    }

    @Test func noContentResponse() async throws {
        let device = ScriptedDevice([
            [
                .readRequest, .write("HTTP/1.1 204 No Content\r\n\r\n"),
                .readRequest, .respond { Reply.ok("after " + $0.path) },
            ]
        ])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            #expect(try await link.fetch("/n").status == 204)
            #expect(try await link.fetch("/next").body == "after /next")
            #expect(device.connectionCount == 1)
        }
    }

    @Test func closeDelimitedResponse() async throws {
        let device = ScriptedDevice([[.readRequest, .write("HTTP/1.1 200 OK\r\n\r\nuntil the end"), .close], ok])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            #expect(try await link.fetch("/c").body == "until the end")
            #expect(try await link.fetch("/next").body == "ok /next")
            #expect(device.connectionCount == 2)
        }
    }

    @Test func connectionCloseResponseReopens() async throws {
        let device = ScriptedDevice([[.readRequest, .write(Reply.ok("bye", headers: ["Connection: close"]))], ok])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            #expect(try await link.fetch("/c").body == "bye")
            #expect(try await link.fetch("/next").body == "ok /next")
            #expect(device.connectionCount == 2)
        }
    }

    // MARK: Invalid requests

    @Test func invalidRequestWritesNothing() async throws {
        let device = ScriptedDevice([ok])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            for path in ["/a b", "/x\r\nInjected: 1", "/nul\0x", "/tab\tx"] {
                #expect(await linkErrorCode { _ = try await link.fetch(path) } == .invalidRequest)
            }
            #expect(
                await linkErrorCode {
                    _ = try await link.execute(
                        HTTPRequest(method: .get, scheme: nil, authority: "evil host", path: "/")
                    ) {
                        _ in 0
                    }
                } == .invalidRequest
            )
            #expect(device.connectionCount == 0)
            #expect(link.openCount == 0)
            #expect(try await link.fetch("/fine").body == "ok /fine")
        }
        #expect(await device.waitUntilFinished())
        #expect(device.allRequests.map(\.path) == ["/fine"])
        #expect(device.connections.first?.unexpected == [])
    }

    // MARK: FIFO

    @Test func concurrentRequestsRunOneAtATimeInOrder() async throws {
        let count = 20
        var steps: [DeviceStep] = []
        for _ in 0..<count {
            steps += [.readRequest, .sleep(milliseconds: 15), .expectQuiet, .respond { Reply.ok("echo " + $0.path) }]
        }
        let device = ScriptedDevice([steps])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            try await withThrowingTaskGroup(of: (Int, Fetched).self) { group in
                for index in 0..<count {
                    group.addTask { (index, try await link.fetch("/r\(index)")) }
                    // Let this task reach the gate before the next one is made, so the order of
                    // arrival is known (under AddressSanitizer 5 ms was once not enough: /r12
                    // reached it before /r11).
                    try await Task.sleep(for: TimeBounds.scaled(.milliseconds(5)))
                }
                var seen = 0
                for try await (index, fetched) in group {
                    #expect(fetched.body == "echo /r\(index)")
                    seen += 1
                }
                #expect(seen == count)
            }
            #expect(device.allRequests.map(\.path) == (0..<count).map { "/r\($0)" })
            #expect(device.connectionCount == 1)
            #expect(device.problems == [])
        }
    }

    // MARK: Deadlines, cancellation in line, shutdown

    @Test func deadlineBeforeHeadReopens() async throws {
        let device = ScriptedDevice([
            warmUpSteps + [.readRequest, .sleep(milliseconds: 1000), .write(Reply.ok("late"))], ok,
        ])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            try await warmUp(link)
            let clock = ContinuousClock()
            let elapsed = await clock.measure {
                #expect(
                    await linkErrorCode {
                        _ = try await link.execute(
                            HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/slow"),
                            deadline: .now + .milliseconds(200)
                        ) { try await $0.body.collect(upTo: 100) }
                    } == .exchangeTimeout
                )
            }
            #expect(elapsed < .milliseconds(900))
            #expect(try await link.fetch("/next").body == "ok /next")
            #expect(device.connectionCount == 2)
        }
    }

    @Test func deadlineInBodyDrainsAndKeepsLink() async throws {
        // The rest comes once the call has ended (a cue, not a sleep that a loaded machine races),
        // and the deadline is scaled under a sanitizer so that the head arrives before it.
        let rest = DeviceCue()
        let device = ScriptedDevice([
            warmUpSteps + [
                .readRequest, .write(Reply.head(contentLength: 20) + Array("0123456789".utf8)),
                .wait(rest), .write("abcdefghij"),
                .readRequest, .respond { Reply.ok("after " + $0.path) },
            ]
        ])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            try await warmUp(link)
            let code = await linkErrorCode {
                _ = try await link.execute(
                    HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/slow"),
                    deadline: .now + TimeBounds.scaled(.milliseconds(200))
                ) { try await $0.body.collect(upTo: 100) }
            }
            rest.signal()
            #expect(code == .exchangeTimeout)
            #expect(try await link.fetch("/next").body == "after /next")
            #expect(device.connectionCount == 1)
        }
    }

    @Test func earlyResponseWhileDeviceIgnoresUploadIsBoundedByDeadline() async throws {
        // The device answers without reading a large streamed body; the request cannot finish.
        let device = ScriptedDevice([
            warmUpSteps + [.readHead, .write(Reply.ok("early")), .sleep(milliseconds: 3000)], ok,
        ])
        var configuration = testConfiguration()
        configuration.idleTimeout = .seconds(20)
        try await withLink(device.transport, configuration: configuration) { (link) async throws in
            try await warmUp(link)
            let chunk = ByteBuffer(repeating: 0x55, count: 64 * 1024)
            let body = HTTPRequestBody.stream(length: nil) { writer in
                for _ in 0..<256 { try await writer.write(chunk) }
            }
            let clock = ContinuousClock()
            let elapsed = await clock.measure {
                do {
                    var request = HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/up")
                    request.headerFields = [:]
                    _ = try await link.execute(request, body: body, deadline: .now + .milliseconds(500)) {
                        try await $0.body.collect(upTo: 100)
                    }
                    Issue.record("expected the exchange to fail")
                } catch {
                    #expect((error as? HTTPLinkError)?.code == .exchangeTimeout)
                }
            }
            #expect(elapsed < .seconds(2))
            #expect(try await link.fetch("/next").body == "ok /next")
        }
    }

    @Test func cancelWhileWaitingInLine() async throws {
        let device = ScriptedDevice([
            [
                .readRequest, .sleep(milliseconds: 400), .respond { Reply.ok("echo " + $0.path) },
                .readRequest, .respond { Reply.ok("echo " + $0.path) },
            ]
        ])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            let first = Task { try await link.fetch("/1") }
            #expect(await eventually { device.allRequests.count == 1 })
            let second = Task { try await link.fetch("/2") }
            try await Task.sleep(for: .milliseconds(50))
            second.cancel()
            #expect(await linkErrorCode { _ = try await second.value } == .cancelled)
            let third = try await link.fetch("/3")
            #expect(third.body == "echo /3")
            #expect(try await first.value.body == "echo /1")
            #expect(device.allRequests.map(\.path) == ["/1", "/3"])
            #expect(device.connectionCount == 1)
        }
    }

    @Test func shutdownFailsLaterRequests() async throws {
        let device = ScriptedDevice([ok])
        let link = HTTPLink(transport: device.transport, configuration: testConfiguration())
        #expect(try await link.fetch("/1").body == "ok /1")
        await link.shutdown()
        #expect(await linkErrorCode { _ = try await link.fetch("/2") } == .shutDown)
        #expect(await device.waitUntilFinished())
        #expect(device.connectionCount == 1)
    }

    @Test func shutdownFailsExchangeInProgress() async throws {
        let device = ScriptedDevice([[.readRequest, .sleep(milliseconds: 2000)]])
        let link = HTTPLink(transport: device.transport, configuration: testConfiguration())
        let task = Task { try await link.fetch("/1") }
        #expect(await eventually { device.allRequests.count == 1 })
        await link.shutdown()
        #expect(await linkErrorCode { _ = try await task.value } == .shutDown)
    }

    // MARK: Back-pressure

    @Test(arguments: Caller.allCases) func slowConsumerBoundsWhatTheDeviceCanWrite(caller: Caller) async throws {
        let total = 64 * 1024 * 1024
        let device = ScriptedDevice(
            ioTimeoutSeconds: 10,
            script: { _ in .largeBodyThenNext(0x63, count: total) }
        )
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            let maxWrittenWhilePaused = Atomic<Int>(0)
            let read = try await caller.run(link) { () async throws -> Int in
                try await link.execute(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/huge")) {
                    response in
                    var read = 0
                    var paused = false
                    for try await part in response.body {
                        read += part.readableBytes
                        if !paused && read >= 1024 * 1024 {
                            paused = true
                            try await Task.sleep(for: .milliseconds(500))
                            let written = device.connections.first?.written ?? 0
                            maxWrittenWhilePaused.store(written, ordering: .relaxed)
                        }
                    }
                    return read
                }
            }
            #expect(read == total)
            let written = maxWrittenWhilePaused.load(ordering: .relaxed)
            #expect(written > 0)
            #expect(written < 16 * 1024 * 1024, "the device wrote \(written) bytes while the consumer paused")
            #expect(try await link.fetch("/next").body == "after /next")
            #expect(device.connectionCount == 1)
        }
    }
}
