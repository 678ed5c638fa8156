import HTTPTypes
import NIOCore

/// The body of a response as it arrives from the device: an async sequence of byte buffers,
/// read from the device only as fast as it is consumed (back-pressure). It can be iterated once.
///
/// Leaving it unread is fine: when the exchange's handler returns, the rest is drained (up to
/// the link's drain limit) so the next request on the link starts in step.
public struct HTTPResponseBody: AsyncSequence, Sendable {
    public typealias Element = ByteBuffer

    let producer: ResponseBodyProducer

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: ResponseBodyProducer.AsyncIterator

        public mutating func next() async throws -> ByteBuffer? {
            try await self.base.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: self.producer.makeAsyncIterator())
    }

    /// Collects the whole body, refusing one larger than `maxBytes`.
    public func collect(upTo maxBytes: Int) async throws -> ByteBuffer {
        var collected = ByteBuffer()
        for try await var part in self {
            guard collected.readableBytes + part.readableBytes <= maxBytes else {
                throw HTTPLinkError(
                    .responseTooLarge,
                    "the response body is larger than the limit of \(maxBytes) bytes; raise the limit or stream the body"
                )
            }
            if collected.readableBytes == 0 {
                collected = part
            } else {
                collected.writeBuffer(&part)
            }
        }
        return collected
    }
}

/// A response whose head has arrived and whose body is still on the link.
public struct HTTPLinkResponse: Sendable {
    public let head: HTTPResponse
    public let body: HTTPResponseBody
}
