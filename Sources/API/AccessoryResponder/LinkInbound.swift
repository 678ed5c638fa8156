import AccessoryTransport
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import Synchronization

/// The inbound half of one link, shared by the link loop (which reads request heads and drains
/// unread bodies) and the current request's ``RequestBody`` (which the handler reads).
///
/// Only one party may read at a time. A lease in `state` decides who: the link loop reads only
/// while no body is current (`BodyPhase.none`), a body reads only while its own exchange is current
/// and no other read is in flight (`available` → `reading`). When an exchange ends the body is
/// revoked, so a handler that leaks its body into another task gets an error, not stolen bytes.
final class LinkInbound: Sendable {
    private let link: ResponderLink
    private let state = TrackedMutex(State())

    /// Who may read, and what the current request's body has done so far.
    enum BodyPhase: Sendable {
        /// No exchange owns the stream: the link loop may read.
        case none
        /// The body may be read and has not ended.
        case available
        /// A body read is in flight.
        case reading
        /// The body ended (its `.end` part was consumed).
        case finished
        /// Reading the body failed; the stream is no longer in step.
        case failed
    }

    struct State: Sendable {
        var generation: UInt64 = 0
        var phase: BodyPhase = .none
        /// `Expect: 100-continue` was asked and not yet answered.
        var continuePending = false
        /// The final response head is being written or was written.
        var responseStarted = false
        var failure: ResponderError? = nil
        /// Body bytes of the current exchange read so far.
        var bodyBytes = 0
        /// The trailer fields that ended the current body, once it ended.
        var trailers: HTTPFields?
    }

    /// What the body had done when the response was about to start.
    enum BodyStatus: Sendable {
        case finished
        case unread(continuePending: Bool)
        case failed
        /// Another task is reading the body right now (a handler leaked it).
        case inUse
    }

    /// The largest request body read before the exchange fails with `bodyTooLarge`
    /// (``ResponderConfiguration/maxRequestBodySize``); `nil`: no limit.
    private let maxBodySize: Int?

    init(link: ResponderLink, maxBodySize: Int? = nil) {
        self.link = link
        self.maxBodySize = maxBodySize
    }

    // MARK: Link loop side

    /// Reads the next part while no exchange owns the stream. Only the link loop calls this.
    func nextPartForLink() async throws -> HTTPRequestPart? {
        do {
            return try await self.link.next()
        } catch {
            throw Self.translate(error)
        }
    }

    /// Makes a new exchange current and returns its generation.
    func beginExchange(expectsContinue: Bool) -> UInt64 {
        self.state.withLock { state in
            state.generation &+= 1
            state.phase = .available
            state.continuePending = expectsContinue
            state.responseStarted = false
            state.failure = nil
            state.bodyBytes = 0
            state.trailers = nil
            return state.generation
        }
    }

    /// Marks that the final response head is about to be written (no `100 Continue` may follow)
    /// and reports what the body has done.
    func responseStarting(generation: UInt64) -> BodyStatus {
        self.state.withLock { state in
            state.responseStarted = true
            return Self.status(of: state)
        }
    }

    /// Ends the exchange: revokes the body and hands the stream back to the link loop.
    func endExchange(generation: UInt64) -> BodyStatus {
        self.state.withLock { state in
            let status = Self.status(of: state)
            if case .inUse = status { return status }
            state.phase = .none
            return status
        }
    }

    /// The trailer fields that ended the body of exchange `generation`, once it ended.
    func trailers(generation: UInt64) -> HTTPFields? {
        self.state.withLock { $0.generation == generation ? $0.trailers : nil }
    }

    /// The protocol error met while reading the current body, if any.
    func failure(generation: UInt64) -> ResponderError? {
        self.state.withLock { $0.generation == generation ? $0.failure : nil }
    }

    /// Reads and discards the rest of an unread body, up to `limit` bytes.
    /// Returns `false` when the body was larger or the stream broke: the link must then close.
    func drainBody(limit: Int) async -> Bool {
        var drained = 0
        while true {
            guard let part = try? await self.nextPartForLink() else { return false }
            switch part {
            case .body(let buffer):
                drained += buffer.readableBytes
                if drained > limit { return false }
            case .end:
                return true
            case .head:
                return false
            }
        }
    }

    // MARK: Body side

    /// Reads the next chunk of the body of exchange `generation`; `nil` at its end.
    func nextBodyChunk(generation: UInt64) async throws -> ByteBuffer? {
        let sendContinue: Bool
        do {
            let decision: Bool? = try self.state.withLock { state throws(ResponderError) -> Bool? in
                guard state.generation == generation else {
                    throw ResponderError(.bodyUnavailable, "the request body was read after its exchange ended")
                }
                switch state.phase {
                case .finished:
                    return nil
                case .reading:
                    throw ResponderError(.bodyUnavailable, "the request body is already being read by another task")
                case .failed:
                    throw state.failure ?? ResponderError(.connectionClosed, "the request body could not be read")
                case .none:
                    throw ResponderError(.bodyUnavailable, "the request body was read after its exchange ended")
                case .available:
                    state.phase = .reading
                    let answer = state.continuePending && !state.responseStarted
                    state.continuePending = false
                    return answer
                }
            }
            guard let decision else { return nil }
            sendContinue = decision
        }

        if sendContinue {
            do {
                try await self.link.write(.head(HTTPResponse(status: .continue)))
            } catch {
                throw self.fail(ResponderError(.connectionClosed, "the link closed before 100 Continue could be sent"))
            }
        }

        let part: HTTPRequestPart?
        do {
            part = try await self.link.next()
        } catch {
            throw self.fail(Self.translate(error))
        }
        switch part {
        case .body(let buffer):
            let total = self.state.withLock { state in
                state.phase = .available
                state.bodyBytes += buffer.readableBytes
                return state.bodyBytes
            }
            if let limit = self.maxBodySize, total > limit {
                throw self.fail(Self.bodyTooLarge(limit))
            }
            return buffer
        case .end(let trailers):
            self.state.withLock {
                $0.phase = .finished
                $0.trailers = trailers.flatMap { $0.isEmpty ? nil : $0 }
            }
            return nil
        case .head:
            throw self.fail(ResponderError(.malformedRequest, "a request head arrived inside a request body"))
        case nil:
            throw self.fail(ResponderError(.connectionClosed, "the peer closed the link before the request body ended"))
        }
    }

    // MARK: Helpers

    private func fail(_ error: ResponderError) -> ResponderError {
        self.state.withLock { state in
            state.phase = .failed
            state.failure = error
        }
        return error
    }

    private static func status(of state: State) -> BodyStatus {
        switch state.phase {
        case .none, .finished: return .finished
        case .available: return .unread(continuePending: state.continuePending)
        case .reading: return .inUse
        case .failed: return .failed
        }
    }

    static func bodyTooLarge(_ limit: Int) -> ResponderError {
        ResponderError(
            .bodyTooLarge,
            "the request body is larger than this accessory accepts (\(limit) bytes, ResponderConfiguration.maxRequestBodySize)"
        )
    }

    /// Maps what the inbound stream throws to the responder's error type.
    static func translate(_ error: any Error) -> ResponderError {
        if let error = error as? ResponderError { return error }
        if let error = error as? HTTPParserError {
            if case .headerOverflow = error {
                return ResponderError(.headersTooLarge, "the request head is larger than the configured limits")
            }
            return ResponderError(.malformedRequest, "the request is not valid HTTP/1.1 (\(error))")
        }
        if error is CancellationError {
            return ResponderError(.connectionClosed, "serving the link was cancelled")
        }
        return ResponderError(.connectionClosed, "the link failed: \(error)")
    }
}
