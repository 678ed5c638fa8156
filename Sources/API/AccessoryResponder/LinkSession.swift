import AccessoryTransport
import HTTPTypes
import Logging
import NIOCore
import NIOHTTPTypes

/// Serves one link: reads requests in order, calls the handler, writes each response, and keeps
/// the stream in step (draining unread bodies) or closes it when it cannot.
struct LinkSession: Sendable {
    /// The most unread request body drained to keep a link alive; a larger one closes the link.
    static let maxDrainBytes = 1 << 20

    let channel: ResponderLink
    let configuration: ResponderConfiguration
    let handler: HTTPHandler
    let logger: Logger
    /// One HTTP/2 request stream: one exchange, framed by the stream (no Content-Length or
    /// chunking rules, no `Connection` header).
    var http2 = false
    /// The executor the session's task already prefers (an HTTP/2 connection's streams share
    /// their connection's); `nil` to choose one from the configuration.
    var executor: (any TaskExecutor)? = nil

    /// Runs until the peer closes the link, a protocol error closes it, or the task is cancelled.
    ///
    /// The loop and the handler run on the link's event loop (unless the configuration says
    /// otherwise): reading a request, answering it and writing the response then stay on one
    /// thread, with no wake-up of another thread per request (see ``EventLoopTaskExecutor``).
    func run() async {
        if self.executor != nil {
            await self.serve()
            return
        }
        await withTaskExecutorPreference(Self.executor(for: self.channel.eventLoop, self.configuration)) {
            await self.serve()
        }
    }

    /// Where a link's requests are served: its event loop, unless the configuration says the
    /// handlers may block.
    static func executor(for eventLoop: any EventLoop, _ configuration: ResponderConfiguration) -> any TaskExecutor {
        configuration.runsHandlersOnEventLoop ? EventLoopTaskExecutor(eventLoop) : globalConcurrentExecutor
    }

    private func serve() async {
        let link = LinkInbound(link: self.channel, maxBodySize: self.configuration.maxRequestBodySize)
        var emitter = ResponseEmitter(link: self.channel, serverName: self.configuration.serverName)
        emitter.http2 = self.http2
        await self.serveRequests(link: link, emitter: emitter)
        await self.channel.close()
    }

    private func serveRequests(link: LinkInbound, emitter: ResponseEmitter) async {
        while true {
            let part: HTTPRequestPart?
            do {
                part = try await self.nextHead(link)
            } catch let error as ResponderError {
                if error.code == .malformedRequest || error.code == .headersTooLarge {
                    await self.refuse(error, emitter: emitter)
                }
                return
            } catch {
                return
            }
            guard let part else { return }  // the peer closed the link between requests
            guard case .head(let head) = part else {
                await self.refuse(
                    ResponderError(.malformedRequest, "request data arrived before a request head"),
                    emitter: emitter
                )
                return
            }
            guard await self.serveExchange(head: head, link: link, emitter: emitter) else { return }
        }
    }

    /// Serves one request; returns whether the link stays open.
    private func serveExchange(head: HTTPRequest, link: LinkInbound, emitter: ResponseEmitter) async -> Bool {
        let framing = RequestFraming(head, http2: self.http2)
        let generation = link.beginExchange(expectsContinue: framing.expectsContinue)
        // A declared length over the limit is refused before the handler runs (and before a
        // 100 Continue): the body is never read, so the link closes after the answer.
        if let limit = self.configuration.maxRequestBodySize, let length = framing.contentLength, length > limit {
            await self.refuse(LinkInbound.bodyTooLarge(limit), emitter: emitter)
            return false
        }
        let request = ResponderRequest(
            head: head,
            body: RequestBody(
                link: link,
                generation: generation,
                declaredLength: framing.hasBody ? framing.contentLength : 0
            )
        )

        var response: ResponderResponse
        do {
            response = try await self.handler(request)
        } catch {
            if let failure = link.failure(generation: generation),
                failure.code == .malformedRequest || failure.code == .headersTooLarge
                    || failure.code == .bodyTooLarge
            {
                await self.refuse(failure, emitter: emitter)
                return false
            }
            self.logger.debug("handler failed", metadata: ["error": "\(error)", "path": "\(head.path ?? "")"])
            response = Self.internalServerError
        }

        var keepAlive =
            self.http2 || (!framing.wantsClose && !response.head.headerFields.containsToken("close", in: .connection))
        switch link.responseStarting(generation: generation) {
        case .finished:
            break
        case .unread(let continuePending):
            // Unanswered 100-continue: the client may or may not send the body, so the stream can
            // only be put back in step by closing it. A large declared body is not worth draining.
            if continuePending || (framing.contentLength ?? 0) > Self.maxDrainBytes { keepAlive = false }
        case .failed:
            keepAlive = false
        case .inUse:
            // The handler returned while another task still reads its body: nothing honest can
            // be sent any more.
            return false
        }

        var outcome = await emitter.emit(response, requestMethod: head.method, keepAlive: keepAlive)
        if case .failedBeforeHead = outcome {
            outcome = await emitter.emit(Self.internalServerError, requestMethod: head.method, keepAlive: keepAlive)
        }
        // An HTTP/2 stream goes on until it closes by itself (its answer may still wait in
        // NIOHTTP2Handler's buffer for the host's flow control: closing the stream now would
        // reset it and drop that), whatever `keepAlive` says of HTTP/1.1.
        guard case .completed = outcome, keepAlive || self.http2 else { return false }

        switch link.endExchange(generation: generation) {
        case .finished:
            return true
        case .unread(let continuePending):
            // On HTTP/2 a body still coming is refused with RST_STREAM NO_ERROR once the answer
            // is out (RFC 9113 §8.1): the host stops sending and keeps the answer, and the drain
            // below ends with the stream.
            if self.http2 { self.channel.resetAfterCompleteAnswer() }
            if continuePending { return false }
            return await link.drainBody(limit: Self.maxDrainBytes)
        case .failed, .inUse:
            return false
        }
    }

    /// Waits for the next request head, closing the link if it stays idle too long.
    private func nextHead(_ link: LinkInbound) async throws -> HTTPRequestPart? {
        guard let idleTimeout = self.configuration.idleTimeout else {
            return try await link.nextPartForLink()
        }
        let idleLink = self.channel
        // NIO's conversion clamps a huge Duration instead of trapping.
        let timer = idleLink.eventLoop.scheduleTask(in: TimeAmount(idleTimeout)) {
            idleLink.closeOnEventLoop()
        }
        defer { timer.cancel() }
        return try await link.nextPartForLink()
    }

    /// Answers a request that cannot be parsed, then the link closes.
    private func refuse(_ error: ResponderError, emitter: ResponseEmitter) async {
        let status: HTTPResponse.Status
        switch error.code {
        case .headersTooLarge: status = .requestHeaderFieldsTooLarge
        case .bodyTooLarge: status = .contentTooLarge
        default: status = .badRequest
        }
        var fields = HTTPFields()
        fields[.contentType] = "text/plain; charset=utf-8"
        let body = ByteBuffer(string: "\(status.code) \(status.reasonPhrase): \(error.message)\n")
        let response = ResponderResponse(head: HTTPResponse(status: status, headerFields: fields), body: .bytes(body))
        _ = await emitter.emit(response, requestMethod: .get, keepAlive: false)
    }

    private static var internalServerError: ResponderResponse {
        var fields = HTTPFields()
        fields[.contentType] = "text/plain; charset=utf-8"
        return ResponderResponse(
            head: HTTPResponse(status: .internalServerError, headerFields: fields),
            body: .bytes(ByteBuffer(string: "500 Internal Server Error\n"))
        )
    }
}
