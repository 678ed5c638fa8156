import HTTPTypes
import NIOCore

typealias ResponseBodyProducer = NIOThrowingAsyncSequenceProducer<
    ByteBuffer, any Error, NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark, ResponseBodyDelegate
>

/// Forwards the body consumer's demand and departure to the handler on its event loop.
struct ResponseBodyDelegate: NIOAsyncSequenceProducerDelegate {
    let handler: NIOLoopBound<HTTPLinkHandler>
    let eventLoop: any EventLoop
    let id: UInt64

    func produceMore() {
        let (handler, id) = (self.handler, self.id)
        self.eventLoop.execute { handler.value.consumerWantsMore(id: id) }
    }

    func didTerminate() {
        let (handler, id) = (self.handler, self.id)
        self.eventLoop.execute { handler.value.consumerGone(id: id) }
    }
}

/// What the async side holds of one exchange. All members are safe to use from any thread.
struct ExchangeHandle: Sendable {
    let id: UInt64
    /// The final response head.
    let head: EventLoopFuture<HTTPResponse>
    /// Whether the request body may be sent (`false`: the device answered without waiting for
    /// it); only for a streamed request body.
    let mayWriteBody: EventLoopFuture<Bool>?
    /// Completes when the exchange is over; the value says whether the link may be reused.
    let completion: EventLoopFuture<Bool>
    let body: Body

    enum Body: Sendable {
        /// The body streams through this producer from the start.
        case stream(ResponseBodyProducer)
        /// The body is gathered until the consumer claims it on the event loop (see
        /// ``HTTPLinkHandler/claimBody(_:id:bodyHandler:)``).
        case pending(NIOLoopBound<PendingResponseBody>)
    }
}

/// The body of a response whose consumer has not yet asked for it. A consumer that runs on the
/// event loop claims it only after the read that carried the head has been fully processed; a
/// small response is then usually complete, and is handed over as one buffer, with no async
/// sequence (and no allocation and suspension per part) at all.
final class PendingResponseBody {
    var buffer: ByteBuffer?
    var ended = false
    var failure: HTTPLinkError?

    var byteCount: Int { self.buffer?.readableBytes ?? 0 }

    func append(_ part: ByteBuffer) {
        if var buffer = self.buffer {
            self.buffer = nil  // keep it uniquely referenced so the append does not copy
            var part = part
            buffer.writeBuffer(&part)
            self.buffer = buffer
        } else {
            self.buffer = part
        }
    }

    func fail(_ error: HTTPLinkError) {
        if !self.ended && self.failure == nil { self.failure = error }
    }
}
