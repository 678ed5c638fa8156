import AccessoryTransport
import NIOCore
import NIOHTTP1
import Synchronization

/// One exchange on an open connection: starting it on the handler, writing a streamed request
/// body beside the response, and handing the response to the caller.
extension HTTPLink {
    func run<Result: Sendable>(
        _ exchange: ExchangeHandle,
        body: HTTPRequestBody,
        handler: NIOLoopBound<HTTPLinkHandler>,
        _ handle: (HTTPLinkResponse) async throws -> Result
    ) async throws -> Result {
        let id = exchange.id
        let eventLoop = self.eventLoop
        guard case .stream(let length, let produce) = body.storage else {
            return try await self.deliver(exchange, handler: handler, handle)
        }
        // The request body is written while the response is awaited: a device may answer early.
        let producerEnded = ProducerEnded()
        return try await withThrowingTaskGroup(of: Void.self, returning: Result.self) { group in
            group.addTask {
                defer { producerEnded.record() }
                guard let mayWriteBody = exchange.mayWriteBody, try await mayWriteBody.get() else { return }
                // Trailers follow only a chunked body (no length): Content-Length framing has no
                // place for them.
                let trailers = length == nil ? TrailerFields() : nil
                let writer = RequestBodyWriter(trailers: trailers) { buffer in
                    try await eventLoop.flatSubmit { handler.value.writeBody(id: id, buffer) }.get()
                }
                do {
                    try await produce(writer)
                } catch {
                    // The device answered and closes the link: the rest of the body is not
                    // wanted, and the writes refused for that are no failure of the exchange.
                    if exchange.requestBodyAbandonment.isRecorded { return }
                    let failure =
                        error as? HTTPLinkError
                        ?? HTTPLinkError(
                            .requestBodyFailed,
                            "the request body could not be read: \(error)",
                            underlying: error
                        )
                    eventLoop.execute { handler.value.failRequest(id: id, failure) }
                    throw failure
                }
                if exchange.requestBodyAbandonment.isRecorded { return }
                let trailerFields = trailers?.value
                producerEnded.record()  // before the end goes out: the exchange may complete at once
                eventLoop.execute { handler.value.endRequest(id: id, trailers: trailerFields) }
            }
            do {
                let result = try await self.deliver(exchange, handler: handler, handle)
                // The device answered and closes the link: the rest of the body is not wanted,
                // and a producer waiting for its source (a quiet pipe) must not hold the call.
                if exchange.requestBodyAbandonment.isRecorded {
                    group.cancelAll()
                    try await group.waitForAll()
                    return result
                }
                // The device answered and keeps the link, so the body must still go out; but a
                // link that ends meanwhile (the exchange's deadline passed, or the device closed
                // it after its answer) takes no more of it, and the producer must not hold the
                // call either.
                group.addTask {
                    // `nil`: cancelled, the call is ending anyway.
                    guard let reusable = try? await exchange.completion.valueUnlessCancelled(), !reusable else {
                        return
                    }
                    if producerEnded.isRecorded { return }
                    throw RequestBodyOutlived()
                }
                do {
                    // Not waitForAll(): it waits for every task even after one threw.
                    while try await group.next() != nil {
                        // The body is out: the exchange's end is not waited for here (an answer
                        // left unread is drained behind the caller, as without a streamed body).
                        if producerEnded.isRecorded {
                            group.cancelAll()
                            break
                        }
                    }
                } catch is RequestBodyOutlived {
                    group.cancelAll()
                    // The device ended the link after its whole answer: that answer is the result.
                    if exchange.requestBodyAbandonment.isRecorded { return result }
                    let failure = try? await self.eventLoop.submit { handler.value.failure }.get()
                    throw failure
                        ?? HTTPLinkError(.linkClosed, "the link closed while the request body was being sent")
                }
                return result
            } catch {
                // The caller gave up; a request body still being written leaves the request
                // incomplete, which tears the link down (the only way to stay in step).
                group.cancelAll()
                throw error
            }
        }
    }

    func deliver<Result: Sendable>(
        _ exchange: ExchangeHandle,
        handler: NIOLoopBound<HTTPLinkHandler>,
        _ handle: (HTTPLinkResponse) async throws -> Result
    ) async throws -> Result {
        let id = exchange.id
        defer { self.onEventLoop { handler.value.consumerGone(id: id) } }
        let head = try await exchange.head.get()
        let body: HTTPResponseBody
        switch exchange.body {
        case .stream(let producer):
            body = HTTPResponseBody(producer: producer, trailers: exchange.trailers)
        case .pending(let pending):
            let claim = { @Sendable in handler.value.claimBody(pending.value, id: id, bodyHandler: handler) }
            body = self.eventLoop.inEventLoop ? claim() : try await self.eventLoop.submit(claim).get()
        }
        return try await handle(HTTPLinkResponse(head: head, body: body))
    }

    /// Runs `body` on the event loop: now if this is the event loop's thread, else soon.
    func onEventLoop(_ body: @escaping @Sendable () -> Void) {
        if self.eventLoop.inEventLoop { body() } else { self.eventLoop.execute(body) }
    }

    /// Starts an exchange on `connection` in one event-loop hop. With `ifUsable`, returns `nil`
    /// (and forgets the connection) when the link is no longer usable, instead of starting.
    func startExchange(
        on connection: Connection,
        id: UInt64,
        head: HTTPRequestHead,
        body start: RequestBodyStart,
        deadline nioDeadline: NIODeadline?,
        ifUsable: Bool
    ) async throws -> ExchangeHandle? {
        let handler = connection.handler
        let exchange: ExchangeHandle?
        // A caller already on the event loop (it prefers the link's executor) starts the exchange
        // without a hop, and will claim the body there too, so the body is gathered until then.
        let onEventLoop = self.eventLoop.inEventLoop
        let begin = { @Sendable () throws -> ExchangeHandle? in
            if ifUsable && !handler.value.isUsable { return nil }
            return try handler.value.startExchange(
                id: id,
                head: head,
                body: start,
                deadline: nioDeadline,
                pendingBody: onEventLoop,
                bodyHandler: handler
            )
        }
        do {
            exchange = try onEventLoop ? begin() : await self.eventLoop.submit(begin).get()
        } catch {
            self.forget(connection)
            throw try await self.enrich(error, connection, until: nioDeadline)
        }
        if exchange == nil { self.forget(connection) }
        return exchange
    }

    /// Adds what the transport knows (a child's stderr and exit status…) to link failures, as
    /// far as it comes before `deadline` (the caller's: the call ends by then).
    func enrich(_ error: any Error, _ connection: Connection, until deadline: NIODeadline?) async throws -> any Error {
        guard let linkError = error as? HTTPLinkError else {
            if error is CancellationError {
                return HTTPLinkError(.cancelled, "the request was cancelled", underlying: error)
            }
            return error
        }
        switch linkError.code {
        case .cancelled, .shutDown, .exchangeTimeout, .invalidRequest, .responseBodyTooLarge:
            // The caller's own end or limit: whatever the stream did meanwhile is not the story.
            return linkError
        default:
            break
        }
        if let cause = connection.stream.endCause, cause.code == .writeTimedOut {
            // The transport ended the stream, not the device, and that end caused whatever the
            // link saw (the device closing, or over TLS a truncation): say so, as the timeout it
            // was. (Had the link closed first, the transport would have recorded no cause.)
            let facts = await connection.stream.diagnostics(until: deadline) ?? cause.message
            return HTTPLinkError(.writeTimeout, facts, underlying: cause)
        }
        switch linkError.code {
        case .linkClosed, .malformedResponse, .idleTimeout:
            return HTTPLinkError.appendingDiagnostics(linkError, await connection.stream.diagnostics(until: deadline))
        default:
            return linkError
        }
    }
}

/// The exchange ended (its link failed) while its request body was still being produced.
private struct RequestBodyOutlived: Error {}

/// Whether a request body's producer is ending: it returned or threw, or is about to hand the
/// body's end to the event loop.
private final class ProducerEnded: Sendable {
    private let value = Atomic<Bool>(false)
    func record() { self.value.store(true, ordering: .releasing) }
    var isRecorded: Bool { self.value.load(ordering: .acquiring) }
}
