import HTTPTypes
import NIOCore

/// Writes a streamed response body (see ``ResponderResponse/Body/stream(length:_:)``).
///
/// Each write suspends while the link cannot take more bytes, so a fast producer never piles up
/// memory in front of a slow link.
public struct ResponseBodyWriter: Sendable {
    let stream: ResponseBodyStream

    /// Writes the next part of the body. Empty buffers are ignored.
    ///
    /// - Throws: ``ResponderError`` when the body would exceed its declared length
    ///   (``ResponderError/Code/responseLengthMismatch``), when the response has already ended
    ///   (``ResponderError/Code/responseFinished``), or when the link failed.
    public func write(_ buffer: ByteBuffer) async throws {
        try await self.stream.write(CollectionOfOne(buffer))
    }

    /// Writes the next parts of the body together: they leave in one flush (one `writev`), which
    /// for a fast producer of small blocks means fewer system calls and wake-ups of the reader.
    /// Empty buffers are ignored.
    ///
    /// - Throws: as ``write(_:)``.
    public func write(contentsOf buffers: some Collection<ByteBuffer> & Sendable) async throws {
        try await self.stream.write(buffers)
    }

    /// Sets the trailer fields sent after the body's last part, with its end (a chunked
    /// HTTP/1.1 body's trailer section, or an HTTP/2 stream's trailing HEADERS frame). Call it
    /// before the producer returns; a later call replaces the fields of an earlier one. A
    /// response to `HEAD`, or with a status that has no body, sends none.
    ///
    /// - Throws: ``ResponderError`` ``ResponderError/Code/trailersNotAllowed`` when the body was
    ///   declared with a length (`Content-Length` framing has no place for trailers), or
    ///   ``ResponderError/Code/responseFinished`` after the response ended.
    public func setTrailers(_ fields: HTTPFields) throws(ResponderError) {
        try self.stream.setTrailers(fields)
    }
}
