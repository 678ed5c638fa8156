import AccessoryTransport
import HTTPTypes
import NIOCore
import NIOHTTPTypes
import Synchronization

/// The state behind a ``ResponseBodyWriter``: the head still to send, the bytes counted so far,
/// and whether the response ended.
///
/// The head is held back until the first body write so that head and first chunk leave in one
/// flush.
final class ResponseBodyStream: Sendable {
    private struct State: Sendable {
        var pendingHead: HTTPResponse?
        var written: Int = 0
        var finished = false
        /// Sent with the body's end.
        var trailers: HTTPFields?
    }

    private let link: ResponderLink
    private let declaredLength: Int?
    private let state: TrackedMutex<State>

    init(link: ResponderLink, head: HTTPResponse, declaredLength: Int?) {
        self.link = link
        self.declaredLength = declaredLength
        self.state = TrackedMutex(State(pendingHead: head))
    }

    /// Whether the head has left (so an error can no longer become a `500`).
    var headWasSent: Bool {
        self.state.withLock { $0.pendingHead == nil }
    }

    func write(_ buffers: some Collection<ByteBuffer> & Sendable) async throws {
        var count = 0
        for buffer in buffers { count += buffer.readableBytes }
        let head = try self.state.withLock { state throws(ResponderError) -> HTTPResponse? in
            guard !state.finished else {
                throw ResponderError(.responseFinished, "the response body was written after the response ended")
            }
            if let declared = self.declaredLength, state.written + count > declared {
                throw ResponderError(
                    .responseLengthMismatch,
                    "the response body exceeds its declared length of \(declared) bytes"
                )
            }
            // An empty chunk would read as the chunked terminator, so it is never sent.
            guard count > 0 else { return nil }
            state.written += count
            defer { state.pendingHead = nil }
            return state.pendingHead
        }
        guard count > 0 else { return }
        if head == nil, buffers.count == 1, let buffer = buffers.first {
            try await self.link.write(.body(buffer))
            return
        }
        var parts: [HTTPResponsePart] = []
        parts.reserveCapacity(buffers.count + 1)
        if let head { parts.append(.head(head)) }
        // An empty chunk would read as the chunked terminator: empty buffers are left out.
        for buffer in buffers where buffer.readableBytes > 0 { parts.append(.body(buffer)) }
        try await self.link.write(contentsOf: parts)
    }

    /// Records the trailer fields sent with the body's end.
    func setTrailers(_ fields: HTTPFields) throws(ResponderError) {
        guard self.declaredLength == nil else {
            throw ResponderError(
                .trailersNotAllowed,
                "trailer fields can follow only a body of unknown length (sent chunked); declare the streamed body with length: nil"
            )
        }
        try self.state.withLock { state throws(ResponderError) in
            guard !state.finished else {
                throw ResponderError(.responseFinished, "trailer fields were set after the response ended")
            }
            state.trailers = fields.isEmpty ? nil : fields
        }
    }

    /// Ends the body: checks the declared length and sends the end (and the head, if no body
    /// byte was written).
    func finish() async throws {
        let (head, trailers) = try self.state.withLock { state throws(ResponderError) -> (HTTPResponse?, HTTPFields?) in
            guard !state.finished else { return (nil, nil) }
            if let declared = self.declaredLength, state.written != declared {
                throw ResponderError(
                    .responseLengthMismatch,
                    "the response body has \(state.written) bytes but declared \(declared)"
                )
            }
            state.finished = true
            defer { state.pendingHead = nil }
            return (state.pendingHead, state.trailers)
        }
        if let head {
            try await self.link.write(contentsOf: CollectionOfTwo(.head(head), .end(trailers)))
        } else {
            try await self.link.write(.end(trailers))
        }
    }

    /// Stops further writes (after the producer failed).
    func close() {
        self.state.withLock { $0.finished = true }
    }
}
