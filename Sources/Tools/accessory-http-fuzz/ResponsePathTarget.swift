import NIOCore
import NIOEmbedded
import NIOHTTP1

@testable import AccessoryHTTP1

/// The host's response path: one request goes out on the link's real pipeline (guard, NIOHTTP1
/// encoder and decoder, decompressor when chosen, link handler and state machine), on an
/// embedded channel, and the fuzzer's bytes come back as the device's answer, cut into reads.
///
/// Beyond "no crash, no hang" it asserts the link's promise: whatever the device sent, the
/// exchange ends (once the line closes at the latest), and if the link says it may be reused,
/// the next request on it gets exactly its own answer.
enum ResponsePathTarget {
    static func run(_ input: inout FuzzInput) {
        let channel = EmbeddedChannel()
        Self.exchange(&input, on: channel)
        // Only now are the exchange's handles gone: a body sequence that deinitialises hands the
        // link a last task, which an embedded loop runs only when asked. Left queued, it would
        // keep the channel, the loop and the handlers alive in a cycle (libFuzzer's leak check
        // saw it; a long run's memory grew by ~500 bytes an input).
        _ = try? channel.finish()
        channel.embeddedEventLoop.run()
        try? channel.embeddedEventLoop.syncShutdownGracefully()
    }

    private static func exchange(_ input: inout FuzzInput, on channel: EmbeddedChannel) {
        let options = input.byte()
        let method: HTTPMethod = options & 1 == 0 ? .GET : .HEAD
        let streamed = options & 2 != 0
        // Streamed: the consumer walks away after this many reads, so the drain is fuzzed too.
        let abandonAfter = Int(input.byte() % 8)
        var configuration = LinkConfiguration()
        configuration.decompressResponses = options & 4 != 0
        configuration.limits.maxHeaderBlockSize = 4096
        configuration.limits.maxStartLineLength = 1024

        let loop = channel.embeddedEventLoop
        let (handlers, link) = LinkOpener.linkHandlers(
            configuration: configuration,
            eventLoop: loop,
            closesAbandonedStreams: false
        )
        let bodyHandler = NIOLoopBound(link, eventLoop: loop)
        do {
            try channel.pipeline.syncOperations.addHandlers(handlers)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
        } catch {
            FuzzCheck.require(false, "the embedded link could not be set up: \(error)")
        }

        let head = HTTPRequestHead(version: .http1_1, method: method, uri: "/fuzz", headers: ["Host": "accessory"])
        let exchange: ExchangeHandle
        do {
            exchange = try link.startExchange(
                id: 1,
                head: head,
                body: .none,
                deadline: nil,
                pendingBody: !streamed,
                bodyHandler: bodyHandler
            )
        } catch {
            FuzzCheck.require(false, "a fresh link refused its first request: \(error)")
            return
        }
        for (index, read) in input.reads().enumerated() {
            if streamed && index == abandonAfter { link.consumerGone(id: 1) }
            // Errors the pipeline caught are the link's business (it breaks); writeInbound
            // rethrows them.
            _ = try? channel.writeInbound(read)
            loop.run()
        }
        if case .pending(let pending) = exchange.body {
            _ = link.claimBody(pending.value, id: 1, bodyHandler: bodyHandler)
        } else {
            link.consumerGone(id: 1)
        }
        loop.run()

        guard let reusable = Self.outcome(exchange.completion) else {
            // Still waiting for bytes: the line closing must end it, and never as reusable.
            channel.pipeline.fireChannelInactive()
            loop.run()
            let ended = Self.outcome(exchange.completion)
            FuzzCheck.require(ended != nil, "the exchange did not end when the line closed")
            FuzzCheck.require(ended != .success(true), "an exchange cut off by the line's end was called reusable")
            return
        }
        guard case .success(true) = reusable, link.isUsable else { return }
        Self.nextRequestGetsItsOwnAnswer(link: link, channel: channel, bodyHandler: bodyHandler)
    }

    /// The link says it is in step: a second request must get exactly the second answer.
    private static func nextRequestGetsItsOwnAnswer(
        link: HTTPLinkHandler,
        channel: EmbeddedChannel,
        bodyHandler: NIOLoopBound<HTTPLinkHandler>
    ) {
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/next", headers: ["Host": "accessory"])
        let next: ExchangeHandle
        do {
            next = try link.startExchange(
                id: 2,
                head: head,
                body: .none,
                deadline: nil,
                pendingBody: true,
                bodyHandler: bodyHandler
            )
        } catch {
            FuzzCheck.require(false, "a link that said it was usable refused the next request: \(error)")
            return
        }
        _ = try? channel.writeInbound(ByteBuffer(string: "HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\nnext"))
        channel.embeddedEventLoop.run()
        var status: Int?
        next.head.assumeIsolated().whenSuccess { status = $0.status.code }
        FuzzCheck.require(
            status == 201,
            "the next request did not get its own answer's head (got \(String(describing: status)))"
        )
        guard case .pending(let pending) = next.body else { return }
        let body = link.claimBody(pending.value, id: 2, bodyHandler: bodyHandler)
        let text = body.wholeBody.map { String(buffer: $0) }
        FuzzCheck.require(text == "next", "the next request's body was \(String(describing: text)), not its own")
    }

    private enum Ended: Equatable {
        case success(Bool)
        case failure
    }

    private static func outcome(_ future: EventLoopFuture<Bool>) -> Ended? {
        var ended: Ended?
        future.assumeIsolated().whenComplete { result in
            switch result {
            case .success(let reusable): ended = .success(reusable)
            case .failure: ended = .failure
            }
        }
        return ended
    }
}
