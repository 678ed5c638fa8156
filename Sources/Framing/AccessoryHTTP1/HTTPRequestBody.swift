import AccessoryTransport
import HTTPTypes
import NIOCore

/// The body of a request sent over a link.
public struct HTTPRequestBody: Sendable {
    package enum Storage: Sendable {
        case none
        case bytes(ByteBuffer)
        case stream(length: Int?, @Sendable (RequestBodyWriter) async throws -> Void)
    }

    package let storage: Storage

    /// No body.
    public static let none = HTTPRequestBody(storage: .none)

    /// A body held in memory; sent with `Content-Length`.
    public static func bytes(_ buffer: ByteBuffer) -> HTTPRequestBody { HTTPRequestBody(storage: .bytes(buffer)) }

    /// A body produced while it is sent. `length`, when known, is sent as `Content-Length` (and
    /// the producer must write exactly that many bytes); otherwise the body is sent chunked, and
    /// the producer may end it with trailer fields (`RequestBodyWriter.setTrailers(_:)`).
    /// `writer.write` suspends while the link cannot take more, so memory stays bounded.
    /// The producer's task is cancelled when the call ends early (its deadline, a cancellation,
    /// a device that will take no more of the body), and the call waits for the producer to
    /// return: one that waits for its source must notice the cancellation.
    public static func stream(
        length: Int? = nil,
        _ produce: @escaping @Sendable (RequestBodyWriter) async throws -> Void
    ) -> HTTPRequestBody {
        HTTPRequestBody(storage: .stream(length: length, produce))
    }

    /// The length announced in `Content-Length`, if known.
    public var knownLength: Int? {
        switch self.storage {
        case .none: return nil
        case .bytes(let buffer): return buffer.readableBytes
        case .stream(let length, _): return length
        }
    }

    /// Whether there is no body at all.
    public var isNone: Bool {
        if case .none = self.storage { return true }
        return false
    }
}

/// Writes the parts of a streamed request body onto the link.
public struct RequestBodyWriter: Sendable {
    let writeBuffer: @Sendable (ByteBuffer) async throws -> Void
    /// Where ``setTrailers(_:)`` records its fields; `nil` for a body with a declared length.
    let trailers: TrailerFields?

    /// - Parameter trailers: where the trailer fields go, `nil` when the body cannot carry any.
    package init(trailers: TrailerFields? = nil, writeBuffer: @escaping @Sendable (ByteBuffer) async throws -> Void) {
        self.writeBuffer = writeBuffer
        self.trailers = trailers
    }

    /// Sets the trailer fields sent after the body's last part, with its end (a chunked
    /// HTTP/1.1 body's trailer section, or an HTTP/2 stream's trailing HEADERS frame). Call it
    /// before the producer returns; a later call replaces the fields of an earlier one.
    ///
    /// A recipient may use trailers only for what it can apply after the body (a checksum, a
    /// final status); RFC 9110 §6.5 lists the fields that must not be sent in them (framing,
    /// routing, authentication).
    ///
    /// - Throws: `HTTPLinkError` `invalid-request` when the body was declared with a length:
    ///   `Content-Length` framing has no place for trailers; stream it with `length: nil`.
    public func setTrailers(_ fields: HTTPFields) throws(HTTPLinkError) {
        guard let trailers = self.trailers else {
            throw HTTPLinkError(
                .invalidRequest,
                "trailer fields can follow only a body of unknown length (sent chunked); make the streamed body with length: nil"
            )
        }
        trailers.record(fields)
    }

    /// Writes `buffer`; suspends while the link cannot take more (back-pressure).
    public func write(_ buffer: ByteBuffer) async throws {
        guard buffer.readableBytes > 0 else { return }
        try await self.writeBuffer(buffer)
    }
}

extension HTTPRequestBody {
    /// Runs an exchange with this body on `executor` (a link's event loop) when it is the link's
    /// own work: `handleIsLinkWork` and no streamed body, which the caller's code produces and
    /// which therefore stays off the event loop. Otherwise runs it where the caller runs.
    package func runExchange<Result>(
        handleIsLinkWork: Bool,
        on executor: EventLoopTaskExecutor,
        _ exchange: () async throws -> Result
    ) async throws -> Result {
        let bodyIsCallerCode = if case .stream = self.storage { true } else { false }
        guard handleIsLinkWork && !bodyIsCallerCode else { return try await exchange() }
        return try await withTaskExecutorPreference(executor) { try await exchange() }
    }
}
