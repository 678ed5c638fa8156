import HTTPTypes
import NIOCore

/// The body of a response as it arrives from the device: an async sequence of byte buffers,
/// read from the device only as fast as it is consumed (back-pressure). It can be iterated once.
///
/// Leaving it unread is fine: when the exchange's handler returns, the rest is drained (up to
/// the link's drain limit) so the next request on the link starts in step.
public struct HTTPResponseBody: AsyncSequence, Sendable {
    public typealias Element = ByteBuffer

    fileprivate enum Storage: Sendable {
        /// The whole body, already received.
        case buffered(ByteBuffer?)
        case stream(ResponseBodyProducer)
        /// Pulled from another link's own stream (an HTTP/2 stream), one buffer per call.
        case pull(@Sendable () async throws -> ByteBuffer?)
    }

    private let storage: Storage
    /// Where the link records the trailer fields that follow the body.
    private let trailerFields: TrailerFields?

    init(producer: ResponseBodyProducer, trailers: TrailerFields?) {
        self.storage = .stream(producer)
        self.trailerFields = trailers
    }

    init(buffered: ByteBuffer?, trailers: TrailerFields?) {
        self.storage = .buffered(buffered)
        self.trailerFields = trailers
    }

    /// A body another kind of link delivers: `next` returns the next buffer, `nil` at the end.
    /// It is called by one iteration at a time (the body is iterated once). The link records
    /// the trailer fields in `trailers` before `next` returns `nil`.
    package init(next: @escaping @Sendable () async throws -> ByteBuffer?, trailers: TrailerFields? = nil) {
        self.storage = .pull(next)
        self.trailerFields = trailers
    }

    /// The trailer fields the device sent after the body (a chunked HTTP/1.1 body's trailer
    /// section, or an HTTP/2 stream's trailing HEADERS frame).
    ///
    /// Read it once the body has been read to its end (the iteration returned `nil`, or
    /// ``collect(upTo:)`` returned): before that the fields may not have arrived. `nil` when the
    /// response had none.
    public var trailers: HTTPFields? { self.trailerFields?.value }

    /// The body when it was handed over whole (an empty buffer for none), `nil` when it streams.
    var wholeBody: ByteBuffer? {
        if case .buffered(let buffer) = self.storage { return buffer ?? ByteBuffer() }
        return nil
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        private enum Base {
            case buffered(ByteBuffer?)
            case stream(ResponseBodyProducer.AsyncIterator)
            case pull(@Sendable () async throws -> ByteBuffer?)
        }

        private var base: Base

        fileprivate init(_ storage: Storage) {
            switch storage {
            case .buffered(let buffer): self.base = .buffered(buffer)
            case .stream(let producer): self.base = .stream(producer.makeAsyncIterator())
            case .pull(let next): self.base = .pull(next)
            }
        }

        public mutating func next() async throws -> ByteBuffer? {
            switch self.base {
            case .buffered(let buffer):
                self.base = .buffered(nil)
                guard let buffer, buffer.readableBytes > 0 else { return nil }
                return buffer
            case .stream(let iterator):
                return try await iterator.next()
            case .pull(let next):
                return try await next()
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(self.storage)
    }

    /// Collects the whole body, refusing one larger than `maxBytes`.
    public func collect(upTo maxBytes: Int) async throws -> ByteBuffer {
        if case .buffered(let buffer) = self.storage {
            guard let buffer else { return ByteBuffer() }
            guard buffer.readableBytes <= maxBytes else { throw Self.tooLarge(maxBytes) }
            return buffer
        }
        var collected = ByteBuffer()
        for try await var part in self {
            guard collected.readableBytes + part.readableBytes <= maxBytes else { throw Self.tooLarge(maxBytes) }
            if collected.readableBytes == 0 {
                collected = part
            } else {
                collected.writeBuffer(&part)
            }
        }
        return collected
    }

    private static func tooLarge(_ maxBytes: Int) -> HTTPLinkError {
        HTTPLinkError(
            .responseBodyTooLarge,
            "the response body is larger than the limit of \(maxBytes) bytes; raise the limit or stream the body"
        )
    }
}

/// A response whose head has arrived and whose body is still on the link.
public struct HTTPLinkResponse: Sendable {
    /// The response head: status and header fields.
    public let head: HTTPResponse
    /// The body, read from the device as it is consumed; what is left unread is drained after
    /// the exchange's handler returns.
    public let body: HTTPResponseBody

    package init(head: HTTPResponse, body: HTTPResponseBody) {
        self.head = head
        self.body = body
    }
}
