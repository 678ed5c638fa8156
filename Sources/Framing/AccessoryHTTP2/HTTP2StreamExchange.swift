import AccessoryHTTP1
import AccessoryTransport
import HTTPTypes
import NIOCore
import NIOHTTPTypes
import Synchronization

/// One exchange's side of a client stream, from whatever executor the exchange runs on: it
/// writes the request on the stream and reads the response in the batches the stream's
/// ``ResponseBatches`` hand over. On the stream's event loop (an exchange that runs as link
/// work), parts that are already there are taken without suspending.
final class HTTP2StreamExchange: @unchecked Sendable {
    // @unchecked: `queue`, `index` and `ending` belong to the exchange that opened the stream,
    // which reads its response one call at a time (the head first, then the body, iterated
    // once); the stream's state is reached only on its event loop, through `stream`.
    private let stream: any HTTP2ClientStreamIO
    private var queue: [HTTPResponsePart] = []
    private var index = 0
    private var ending: ResponseBatches.Ending?
    private var responseEnded = false
    /// The device answered and stopped taking the request body (``sendWaiting(_:)``).
    private let bodyAbandoned = Atomic<Bool>(false)
    /// Where the response's trailer fields are recorded, before the body's end is reported.
    let trailers = TrailerFields()
    /// Reports trailer fields for `-v`.
    private let tracer: LinkTracer?
    /// The transport's own finding that ended the connection's byte stream, once it has
    /// (``OpenedByteStream/endCause``).
    private let endCause: @Sendable () -> TransportError?

    init(
        stream: any HTTP2ClientStreamIO,
        tracer: LinkTracer? = nil,
        endCause: @escaping @Sendable () -> TransportError? = { nil }
    ) {
        self.stream = stream
        self.tracer = tracer
        self.endCause = endCause
    }

    /// The exchange's failure when the transport ended the connection itself because the device
    /// stopped taking bytes (a USB write timeout): whatever the stream saw of that end (the
    /// connection closing, a stream cut short) is reported as the timeout it was, with the
    /// transport's reason, as on an HTTP/1.1 link. `nil` while the transport has no such cause.
    var transportWriteTimeout: HTTPLinkError? {
        guard let cause = self.endCause(), cause.code == .writeTimedOut else { return nil }
        return HTTPLinkError(.writeTimeout, cause.message, underlying: cause)
    }

    /// Writes `parts` and flushes them, without waiting: a failure of the stream shows in its
    /// response, which the exchange reads next.
    func send(_ parts: [HTTPRequestPart]) {
        self.stream.send(parts)
    }

    /// Writes one part and waits until the stream took it (flow control holds a streamed upload
    /// back here). Once the whole response has arrived, a write the stream refuses (the device
    /// reset it after answering, RFC 9113 §8.1) ends the request body quietly: this and every
    /// later part are dropped, and the exchange reads the answer.
    func sendWaiting(_ part: HTTPRequestPart) async throws {
        if self.bodyAbandoned.load(ordering: .relaxed) { return }
        do {
            try await self.stream.sendWaiting(part)
        } catch  where self.stream.arrival.isWhole && !(error is CancellationError) {
            self.bodyAbandoned.store(true, ordering: .relaxed)
            self.tracer?.emit(
                .note("the device answered before the request body's end and took no more of it; the rest is not sent")
            )
        }
    }

    /// Closes the stream when the exchange is over; one that has not ended both ways is reset.
    func close() {
        self.stream.close()
    }

    /// The final response head; 1xx heads are skipped (at most 100 of them).
    func finalHead() async throws -> HTTPResponse {
        var informational = 0
        while let part = try await self.nextPart() {
            guard case .head(let head) = part else {
                throw HTTPLinkError(.malformedResponse, "the device sent HTTP/2 data before a response head")
            }
            guard (100...599).contains(head.status.code) else {
                // RFC 9110 §15, as on an HTTP/1.1 link.
                throw HTTPLinkError(
                    .malformedResponse,
                    "the device sent status code \(head.status.code), outside 100-599 (RFC 9110 §15)"
                )
            }
            if head.status.kind != .informational { return head }
            informational += 1
            if informational > 100 {
                throw HTTPLinkError(.malformedResponse, "the device sent more than 100 informational heads")
            }
        }
        throw HTTPLinkError(.linkClosed, "the device ended the HTTP/2 stream before a response head")
    }

    /// The next piece of the body, `nil` after its end.
    func nextBodyBuffer() async throws -> ByteBuffer? {
        do {
            while !self.responseEnded, let part = try await self.nextPart() {
                switch part {
                case .body(let buffer): return buffer
                case .end(let trailers):
                    if let trailers, !trailers.isEmpty {
                        self.tracer?.emit(.note("trailer fields: \(HTTP2Link.render(trailers))"))
                        self.trailers.record(trailers)
                    }
                    self.responseEnded = true
                case .head: throw HTTPLinkError(.malformedResponse, "the device sent a second response head")
                }
            }
            if !self.responseEnded {
                throw HTTPLinkError(.linkClosed, "the device ended the HTTP/2 stream before the body's end")
            }
            return nil
        } catch let error as HTTPLinkError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            // The stream or the connection failed while the body was read (a reset, a GOAWAY, a
            // connection error): the caller gets the link's error type, as the head's reader does.
            throw HTTPLinkError(
                .linkClosed,
                "the HTTP/2 stream failed while the body was read: \(HTTP2ErrorText.describe(error))",
                underlying: error
            )
        }
    }

    /// The next response part; `nil` once the stream closed.
    private func nextPart() async throws -> HTTPResponsePart? {
        while true {
            if self.index < self.queue.count {
                defer { self.index += 1 }
                return self.queue[self.index]
            }
            switch self.ending {
            case .closed: return nil
            case .failed(let error): throw error
            case nil: break
            }
            let batch = try await self.nextBatch()
            self.queue = batch.parts
            self.index = 0
            self.ending = batch.ending
        }
    }

    private func nextBatch() async throws -> ResponseBatches.Batch {
        let stream = self.stream
        let eventLoop = stream.eventLoop
        if eventLoop.inEventLoop, let ready = stream.batches.value.takeReady() { return ready }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                if eventLoop.inEventLoop {
                    stream.batches.value.wait(continuation)
                } else {
                    eventLoop.execute { stream.batches.value.wait(continuation) }
                }
            }
        } onCancel: {
            eventLoop.execute { stream.batches.value.cancel() }
        }
    }
}
