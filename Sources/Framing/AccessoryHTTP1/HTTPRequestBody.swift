import AccessoryTransport
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
    /// the producer must write exactly that many bytes); otherwise the body is sent chunked.
    /// `writer.write` suspends while the link cannot take more, so memory stays bounded.
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

    package init(writeBuffer: @escaping @Sendable (ByteBuffer) async throws -> Void) {
        self.writeBuffer = writeBuffer
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
