import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import AccessoryHTTP1

/// `HTTPLinkHandler` in the link's real pipeline (guard, NIOHTTP1's encoder and decoder) on an
/// `EmbeddedChannel`: every step is synchronous, so these tests wait on events, never on time.
@Suite struct HTTPLinkHandlerEmbeddedTests {
    /// The pipeline `HTTPLink` builds, on an embedded channel that is active.
    final class Link {
        let channel = EmbeddedChannel()
        let handler: HTTPLinkHandler
        let reads = ReadCounter()
        var nextID: UInt64 = 1

        let guardHandler = LinkGuardHandler(maxStartLineLength: 1024)
        var loop: EmbeddedEventLoop { self.channel.embeddedEventLoop }

        init(configuration: LinkConfiguration = LinkConfiguration(), closesAbandonedStreams: Bool = false) throws {
            let guardHandler = self.guardHandler
            self.handler = HTTPLinkHandler(
                configuration: configuration,
                guardHandler: guardHandler,
                eventLoop: self.channel.embeddedEventLoop,
                closesAbandonedStreams: closesAbandonedStreams
            )
            try self.channel.pipeline.syncOperations.addHandlers([
                self.reads,
                guardHandler,
                HTTPRequestEncoder(),
                ByteToMessageHandler(
                    HTTPResponseDecoder(leftOverBytesStrategy: .dropBytes, informationalResponseStrategy: .forward)
                ),
                self.handler,
            ])
            try self.channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
        }

        /// Starts a request; its body is gathered until claimed (as for a consumer on the loop),
        /// or with `streamed`, goes to an async sequence with back-pressure from the start.
        func start(
            _ uri: String,
            method: HTTPMethod = .GET,
            headers: HTTPHeaders = [:],
            body: RequestBodyStart = .none,
            streamed: Bool = false,
            deadline: NIODeadline? = nil
        ) throws -> ExchangeHandle {
            let id = self.nextID
            self.nextID += 1
            let head = HTTPRequestHead(version: .http1_1, method: method, uri: uri, headers: headers)
            return try self.handler.startExchange(
                id: id,
                head: head,
                body: body,
                deadline: deadline,
                pendingBody: !streamed,
                bodyHandler: NIOLoopBound(self.handler, eventLoop: self.channel.embeddedEventLoop)
            )
        }

        /// Closes the channel, which takes its pipeline apart. Every test calls it (deferred): an
        /// embedded channel left open holds its pipeline, this handler and its timers in a
        /// reference cycle, and LeakSanitizer reports each test's link as leaked.
        func finish() {
            _ = try? self.channel.finish(acceptAlreadyClosed: true)
        }

        /// Moves the embedded loop's clock on; timers that fall due run.
        func wait(_ amount: TimeAmount) {
            self.loop.advanceTime(by: amount)
        }

        /// What the link wrote to the device since the last call.
        func written() throws -> String {
            var text = ""
            while let data = try self.channel.readOutbound(as: IOData.self) {
                if case .byteBuffer(let buffer) = data { text += String(buffer: buffer) }
            }
            return text
        }

        /// Bytes from the device. Errors the pipeline caught are the handler's business (it
        /// breaks the link); `writeInbound` would rethrow them, so they are swallowed here.
        func device(_ text: String) {
            _ = try? self.channel.writeInbound(ByteBuffer(string: text))
            self.channel.embeddedEventLoop.run()
        }

        /// The body as the consumer would claim it now.
        func claimedBody(_ handle: ExchangeHandle) -> String? {
            guard case .pending(let pending) = handle.body else { return nil }
            let body = self.handler.claimBody(
                pending.value,
                id: handle.id,
                bodyHandler: NIOLoopBound(self.handler, eventLoop: self.channel.embeddedEventLoop)
            )
            return body.wholeBody.map { String(buffer: $0) }
        }

        /// Why the gathered body of `exchange` failed, if it did.
        func bodyFailure(_ exchange: ExchangeHandle) -> HTTPLinkError.Code? {
            guard case .pending(let pending) = exchange.body else { return nil }
            return pending.value.failure?.code
        }
    }

    @Test func aResponseCompletesTheExchangeAndTheLinkCarriesTheNext() throws {
        let link = try Link()
        defer { link.finish() }
        let first = try link.start("/status")
        #expect(try link.written().hasPrefix("GET /status HTTP/1.1\r\n"))
        link.device("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
        #expect(result(first.head)?.status.code == 200)
        #expect(result(first.completion) == true, "reusable")
        #expect(link.claimedBody(first) == "hello")
        #expect(link.handler.isUsable)

        let second = try link.start("/next")
        #expect(try link.written().hasPrefix("GET /next HTTP/1.1\r\n"))
        link.device("HTTP/1.1 204 No Content\r\n\r\n")
        #expect(result(second.head)?.status.code == 204)
        #expect(result(second.completion) == true)
    }

    @Test func anAbandonedBodyIsDrainedSoTheNextAnswerIsInStep() throws {
        let link = try Link()
        defer { link.finish() }
        let abandoned = try link.start("/big", streamed: true)
        guard case .stream(let sequence) = abandoned.body else {
            Issue.record("expected a streamed body")
            return
        }
        link.device("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
        #expect(result(abandoned.head)?.status.code == 200)
        // Nobody reads the body: once the producer's buffer is full, the link stops asking the
        // device for bytes (back-pressure).
        for _ in 0..<8 { link.device("0123456789") }
        let readsWhileFull = link.reads.count
        link.device("0123456789")
        #expect(link.reads.count == readsWhileFull, "no read is asked for while the consumer's buffer is full")
        // The consumer goes away: the link reads again, discarding the rest.
        link.handler.consumerGone(id: abandoned.id)
        #expect(link.reads.count > readsWhileFull, "draining asks the device for the rest")
        #expect(result(abandoned.completion) == nil, "not over until the rest has arrived")
        link.device("0123456789")
        #expect(result(abandoned.completion) == true)
        #expect(link.handler.isUsable)
        _ = sequence

        let next = try link.start("/status")
        link.device("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        #expect(link.claimedBody(next) == "ok", "the next answer is not mixed with the drained one")
    }

    @Test func aCancelledRequestsLateAnswerIsDrained() throws {
        let link = try Link()
        defer { link.finish() }
        let cancelled = try link.start("/slow")
        link.handler.cancel(id: cancelled.id)
        #expect((failure(cancelled.head) as? HTTPLinkError)?.code == .cancelled)
        link.device("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlate")
        #expect(result(cancelled.completion) == true)
        #expect(link.handler.isUsable)

        let next = try link.start("/status")
        link.device("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nnew")
        #expect(link.claimedBody(next) == "new")
    }

    @Test func bytesWhileNoRequestIsOutstandingBreakTheLink() throws {
        let link = try Link()
        defer { link.finish() }
        link.device("HTTP/1.1 200 OK\r\n")
        #expect(!link.handler.isUsable)
        #expect(link.handler.failure?.code == .strayBytes)
        #expect(throws: HTTPLinkError.self) { _ = try link.start("/status") }
    }

    @Test func aHeadResponseEndsWithoutABody() throws {
        let link = try Link()
        defer { link.finish() }
        let head = try link.start("/file", method: .HEAD)
        link.device("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        #expect(result(head.completion) == true, "Content-Length of a HEAD response announces no body")
        #expect(link.claimedBody(head) == "")
        #expect(link.handler.isUsable)
    }

    @Test func aDeviceThatClosesMidBodyFailsTheExchange() throws {
        let link = try Link()
        defer { link.finish() }
        let exchange = try link.start("/big")
        link.device("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n012")
        link.channel.pipeline.fireChannelInactive()
        link.channel.embeddedEventLoop.run()
        #expect(result(exchange.completion) != true, "a truncated link is never reused")
        #expect(!link.handler.isUsable)
        guard case .pending(let pending) = exchange.body else {
            Issue.record("expected a gathered body")
            return
        }
        #expect(pending.value.failure?.code == .linkClosed)
    }

    @Test(arguments: [
        ("Content-Length: 5\r\nContent-Length: 6", "conflicting Content-Length"),
        ("Content-Length: 5\r\nTransfer-Encoding: chunked", "both Content-Length and Transfer-Encoding"),
    ])
    func ambiguousFramingIsNamedForWhatItIs(headers: String, words: String) throws {
        let link = try Link()
        defer { link.finish() }
        let exchange = try link.start("/x")
        link.device("HTTP/1.1 200 OK\r\n\(headers)\r\n\r\nhello")
        #expect((failure(exchange.head) as? HTTPLinkError)?.code == .malformedResponse)
        let message = link.handler.failure?.message ?? ""
        #expect(message.contains(words), "\(message)")
    }

    @Test func bareLineFeedsAreNamed() throws {
        let link = try Link()
        defer { link.finish() }
        let exchange = try link.start("/x")
        link.device("HTTP/1.1 200 OK\nContent-Length: 5\n\nhello")
        #expect((failure(exchange.head) as? HTTPLinkError)?.code == .malformedResponse)
        let message = link.handler.failure?.message ?? ""
        #expect(message.contains("bare LF line endings"), "\(message)")
    }
    // MARK: Timers, on the embedded loop's clock

    @Test func theIdleTimeoutEndsASilentExchange() throws {
        var configuration = LinkConfiguration()
        configuration.idleTimeout = .seconds(3)
        let link = try Link(configuration: configuration)
        defer { link.finish() }
        let exchange = try link.start("/silent")
        link.wait(.milliseconds(2900))
        #expect(failure(exchange.head) == nil, "not yet")
        link.wait(.milliseconds(200))
        #expect((failure(exchange.head) as? HTTPLinkError)?.code == .idleTimeout)
        #expect(result(exchange.completion) == false)
        #expect(!link.channel.isActive, "a link out of step is closed")
    }

    @Test func aDeviceThatKeepsSendingIsNotIdle() throws {
        var configuration = LinkConfiguration()
        configuration.idleTimeout = .seconds(3)
        let link = try Link(configuration: configuration)
        defer { link.finish() }
        let exchange = try link.start("/trickle")
        link.device("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
        for byte in ["a", "b", "c", "d"] {
            link.wait(.seconds(2))
            link.device(byte)
        }
        #expect(link.handler.failure == nil, "8 s in, but never 3 s of silence")
        link.device("e")
        #expect(result(exchange.completion) == true)
        #expect(link.claimedBody(exchange) == "abcde")
    }

    @Test func settlingDiscardsStaleBytesUntilTheLineIsQuiet() throws {
        let link = try Link()
        defer { link.finish() }
        var settled = false
        link.handler.settle().assumeIsolated().whenSuccess { settled = true }
        link.device("HTTP/1.1 200 OK\r\nContent-Le")  // the tail of an answer from before the reopen
        link.wait(.milliseconds(80))
        link.device("ngth: 3\r\n\r\nold")
        link.wait(.milliseconds(90))
        #expect(!settled, "quiet for 90 ms only")
        #expect(link.handler.failure == nil, "stale bytes while settling are not stray bytes")
        link.wait(.milliseconds(20))
        #expect(settled)
        let next = try link.start("/status")
        link.device("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nnew")
        #expect(link.claimedBody(next) == "new")
    }

    @Test func settlingEndsAtItsMaximumWhenTheDeviceNeverStops() throws {
        var configuration = LinkConfiguration()
        configuration.settleMaxDuration = .seconds(1)
        let link = try Link(configuration: configuration)
        defer { link.finish() }
        var settled = false
        link.handler.settle().assumeIsolated().whenSuccess { settled = true }
        for _ in 0..<19 {
            link.wait(.milliseconds(50))
            link.device("noise")
        }
        #expect(!settled)
        link.wait(.milliseconds(50))
        #expect(settled)
        #expect(link.handler.isUsable)
    }

    @Test func theDeadlineFailsTheCallerAndTheRestIsDrainedBehindIt() throws {
        let link = try Link()
        defer { link.finish() }
        let exchange = try link.start("/big", deadline: link.loop.now + .seconds(2))
        link.device("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123")
        #expect(result(exchange.head)?.status.code == 200)
        link.wait(.seconds(2))
        #expect(link.bodyFailure(exchange) == .exchangeTimeout, "the caller hears at its deadline")
        #expect(result(exchange.completion) == nil, "the rest is still due")
        link.device("456789")
        #expect(result(exchange.completion) == true, "drained: the link stays in step")
        let next = try link.start("/status")
        link.device("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        #expect(link.claimedBody(next) == "ok")
    }

    @Test func aDrainThatTakesTooLongBreaksTheLink() throws {
        let link = try Link()
        defer { link.finish() }
        let exchange = try link.start("/endless", streamed: true)
        link.device("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123")
        link.handler.consumerGone(id: exchange.id)
        link.wait(.milliseconds(4900))
        #expect(link.handler.failure == nil)
        link.wait(.milliseconds(200))
        #expect(link.handler.failure?.code == .cancelled)
        #expect(result(exchange.completion) == false)
        #expect(!link.channel.isActive)
    }

    @Test func theContinueTimeoutSendsTheHeldBody() throws {
        let link = try Link()
        defer { link.finish() }
        let exchange = try link.start(
            "/upload",
            method: .PUT,
            headers: ["Expect": "100-continue", "Content-Length": "4"],
            body: .complete(ByteBuffer(string: "data"))
        )
        #expect(try !link.written().hasSuffix("data"), "held back for 100 Continue")
        link.wait(.milliseconds(999))
        #expect(try link.written() == "")
        link.wait(.milliseconds(1))
        #expect(try link.written() == "data", "sent anyway after 1 s, as curl does")
        link.device("HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
        #expect(result(exchange.completion) == true)
    }

    @Test func onIndependentStreamsACancelClosesTheStreamAtOnce() throws {
        let link = try Link(closesAbandonedStreams: true)
        defer { link.finish() }
        let exchange = try link.start("/slow")
        link.handler.cancel(id: exchange.id)
        #expect((failure(exchange.head) as? HTTPLinkError)?.code == .cancelled)
        #expect(result(exchange.completion) == false, "not reused: the next request opens a fresh stream")
        #expect(!link.channel.isActive)
    }
}

/// Counts the reads the link asks of the transport: back-pressure made visible.
final class ReadCounter: ChannelOutboundHandler {
    typealias OutboundIn = Any
    private(set) var count = 0

    func read(context: ChannelHandlerContext) {
        self.count += 1
        context.read()
    }
}

/// The value of a future that has completed successfully, else `nil` (an embedded loop runs
/// callbacks at once).
private func result<T>(_ future: EventLoopFuture<T>) -> T? {
    var value: T?
    future.assumeIsolated().whenSuccess { value = $0 }
    return value
}

/// The error of a future that has failed, else `nil`.
private func failure<T>(_ future: EventLoopFuture<T>) -> (any Error)? {
    var error: (any Error)?
    future.assumeIsolated().whenFailure { error = $0 }
    return error
}
