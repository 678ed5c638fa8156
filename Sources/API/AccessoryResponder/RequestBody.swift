import HTTPTypes
import NIOCore

/// The body of a request, streamed from the link as it arrives.
///
/// It is single pass: iterate it once (or call ``collect(upTo:)`` once). Reading is
/// back-pressured: while the handler does not ask for more, the responder stops reading the
/// link. The first read answers `Expect: 100-continue`. After the handler's response has been
/// sent, the body can no longer be read.
public struct RequestBody: AsyncSequence, Sendable {
    public typealias Element = ByteBuffer

    enum Source: Sendable {
        case link(LinkInbound, generation: UInt64)
        case buffered(ByteBuffer?)
    }

    let source: Source
    /// The declared `Content-Length`, when the request had one.
    let declaredLength: Int?

    /// An empty body.
    public init() {
        self.source = .buffered(nil)
        self.declaredLength = 0
    }

    /// A body already in memory (for calling a handler directly, in tests for instance).
    public init(bytes: ByteBuffer) {
        self.source = .buffered(bytes)
        self.declaredLength = bytes.readableBytes
    }

    init(link: LinkInbound, generation: UInt64, declaredLength: Int?) {
        self.source = .link(link, generation: generation)
        self.declaredLength = declaredLength
    }

    /// The trailer fields the host sent after the body (a chunked HTTP/1.1 body's trailer
    /// section, or an HTTP/2 stream's trailing HEADERS frame).
    ///
    /// Read it once the body has been read to its end (the iteration returned `nil`, or
    /// ``collect(upTo:)`` returned): before that the fields have not arrived. `nil` when the
    /// request had none.
    public var trailers: HTTPFields? {
        guard case .link(let link, let generation) = self.source else { return nil }
        return link.trailers(generation: generation)
    }

    /// Iterates the body's chunks.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var source: Source

        public mutating func next() async throws -> ByteBuffer? {
            switch self.source {
            case .link(let link, let generation):
                return try await link.nextBodyChunk(generation: generation)
            case .buffered(let buffer):
                self.source = .buffered(nil)
                guard let buffer, buffer.readableBytes > 0 else { return nil }
                return buffer
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(source: self.source)
    }

    /// Reads the whole body into one buffer.
    ///
    /// - Throws: ``ResponderError`` with code ``ResponderError/Code/bodyTooLarge`` as soon as the
    ///   body is known to exceed `maxBytes` (before reading it, when `Content-Length` says so).
    public func collect(upTo maxBytes: Int) async throws -> ByteBuffer {
        if let declaredLength, declaredLength > maxBytes {
            throw Self.tooLarge(maxBytes)
        }
        var collected: ByteBuffer? = nil
        for try await var chunk in self {
            guard var existing = collected else {
                guard chunk.readableBytes <= maxBytes else { throw Self.tooLarge(maxBytes) }
                collected = chunk
                continue
            }
            guard existing.readableBytes + chunk.readableBytes <= maxBytes else { throw Self.tooLarge(maxBytes) }
            collected = nil  // keep `existing` uniquely referenced so the append does not copy
            existing.writeBuffer(&chunk)
            collected = existing
        }
        return collected ?? ByteBuffer()
    }

    private static func tooLarge(_ maxBytes: Int) -> ResponderError {
        ResponderError(.bodyTooLarge, "the request body is larger than \(maxBytes) bytes")
    }
}
