import HTTPTypes
import NIOCore
import NIOHTTPTypes
import Synchronization

/// The responder's side of one link, as the link's task sees it: the next request part, and
/// response parts written in order with back-pressure. The link is a whole HTTP/1.1 channel
/// (``ResponderLinkHandler``) or one HTTP/2 request stream (``HTTP2ServerStream``).
///
/// It does what `NIOAsyncChannel` would, for exactly one reader and one writer at a time, with a
/// fast path for a task that runs on the link's event loop (the default, see
/// ``ResponderConfiguration/runsHandlersOnEventLoop``): a part already queued is returned, and a
/// response written, without any suspension or hand-off at all. Profiles put `NIOAsyncChannel`'s
/// general machinery (its producer and writer state machines, locks and continuations) at about
/// a sixth of the responder's time per small request. Tasks elsewhere (a handler that reads its
/// body from another task, or handlers configured off the event loop) take the same paths
/// through one event-loop hop.
struct ResponderLink: Sendable {
    /// What carries the link, and what closing it means.
    enum Carrier: Sendable {
        /// A channel of its own (HTTP/1.1): closing it closes the channel (or, with a session
        /// layer below, ends the session).
        case channel(any Channel)
        /// One request stream of an HTTP/2 connection: closing it resets the stream, unless it
        /// closed already.
        case http2Stream(NIOLoopBound<HTTP2ServerStream>, closed: EventLoopFuture<Void>)
    }

    /// The event-loop half, by its concrete type: a call through `any ResponderLinkEnd` would
    /// run the generic `write` unspecialized, which cost HTTP/1.1 `/status` about 5 % (measured).
    private enum End: Sendable {
        case http1(NIOLoopBound<ResponderLinkHandler>)
        case http2(NIOLoopBound<HTTP2ServerStream>)
    }

    let eventLoop: any EventLoop
    let carrier: Carrier
    private let end: End

    /// An HTTP/1.1 link on `channel`, served through `handler`.
    init(channel: any Channel, handler: ResponderLinkHandler) {
        self.eventLoop = channel.eventLoop
        self.carrier = .channel(channel)
        self.end = .http1(NIOLoopBound(handler, eventLoop: channel.eventLoop))
    }

    /// One HTTP/2 request stream. On the stream's event loop.
    init(stream: HTTP2ServerStream) {
        let bound = NIOLoopBound(stream, eventLoop: stream.eventLoop)
        self.eventLoop = stream.eventLoop
        self.carrier = .http2Stream(bound, closed: stream.closedFuture)
        self.end = .http2(bound)
    }

    /// Completes when the link is closed (for a stream: reset, or ended both ways).
    var closeFuture: EventLoopFuture<Void> {
        switch self.carrier {
        case .channel(let channel): channel.closeFuture
        case .http2Stream(_, let closed): closed
        }
    }

    /// The next request part; `nil` once the peer has closed its side of the link.
    /// Only one task may wait at a time (``LinkInbound`` sees to that).
    func next() async throws -> HTTPRequestPart? {
        switch self.end {
        case .http1(let end): try await Self.next(end, on: self.eventLoop)
        case .http2(let end): try await Self.next(end, on: self.eventLoop)
        }
    }

    private static func next<End: ResponderLinkEnd>(
        _ end: NIOLoopBound<End>,
        on eventLoop: any EventLoop
    ) async throws -> HTTPRequestPart? {
        try Task.checkCancellation()
        if eventLoop.inEventLoop {
            switch end.value.takePart() {
            case .part(let part): return part
            case .end: return nil
            case .failed(let error): throw error
            case .empty: break
            }
        }
        // A task cancelled while it waits (the responder is stopping) stops waiting. The flag
        // is set before the cancel is queued, and looked at on the event loop before the wait
        // begins: a cancel that comes while the wait is on its way to the event loop is not lost.
        let cancellation = WaitCancellation()
        return try await withTaskCancellationHandler {
            guard eventLoop.inEventLoop else {
                return try await eventLoop.flatSubmit { () -> EventLoopFuture<HTTPRequestPart?> in
                    if cancellation.isCancelled { return eventLoop.makeFailedFuture(CancellationError()) }
                    return end.value.nextPart()
                }.get()
            }
            return try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<HTTPRequestPart?, any Error>) in
                // Still on the event loop: nothing can arrive between `takePart` and this.
                if cancellation.isCancelled {
                    continuation.resume(throwing: CancellationError())
                } else {
                    end.value.wait(.continuation(continuation))
                }
            }
        } onCancel: {
            cancellation.cancel()
            eventLoop.execute { end.value.cancelPartWaiter() }
        }
    }

    /// Writes `parts` and flushes; returns once the link can take more.
    func write(contentsOf parts: some Sequence<HTTPResponsePart> & Sendable) async throws {
        switch self.end {
        case .http1(let end): try await Self.write(parts, to: end, on: self.eventLoop)
        case .http2(let end): try await Self.write(parts, to: end, on: self.eventLoop)
        }
    }

    private static func write<End: ResponderLinkEnd>(
        _ parts: some Sequence<HTTPResponsePart> & Sendable,
        to end: NIOLoopBound<End>,
        on eventLoop: any EventLoop
    ) async throws {
        try Task.checkCancellation()
        if eventLoop.inEventLoop {
            guard try !end.value.write(parts) else { return }
        }
        let cancellation = WaitCancellation()
        try await withTaskCancellationHandler {
            guard eventLoop.inEventLoop else {
                try await eventLoop.flatSubmit { () -> EventLoopFuture<Void> in
                    if cancellation.isCancelled { return eventLoop.makeFailedFuture(CancellationError()) }
                    return end.value.writeThenWaitForWritability(parts)
                }.get()
                return
            }
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                if cancellation.isCancelled {
                    continuation.resume(throwing: CancellationError())
                } else {
                    end.value.waitForWritability(.continuation(continuation))
                }
            }
        } onCancel: {
            cancellation.cancel()
            eventLoop.execute { end.value.cancelWritabilityWaiters() }
        }
    }

    func write(_ part: HTTPResponsePart) async throws {
        try await self.write(contentsOf: CollectionOfOne(part))
    }

    /// On an HTTP/2 stream whose answer went out whole: RST_STREAM NO_ERROR, the host's cue to
    /// stop sending the request body without an error (RFC 9113 §8.1).
    func resetAfterCompleteAnswer() {
        guard case .http2(let end) = self.end else { return }
        if self.eventLoop.inEventLoop {
            end.value.resetAfterCompleteAnswer()
        } else {
            self.eventLoop.execute { end.value.resetAfterCompleteAnswer() }
        }
    }

    /// Closes the link, from a timer or callback on its event loop, without waiting.
    func closeOnEventLoop() {
        switch self.carrier {
        case .channel(let channel): channel.close(promise: nil)
        case .http2Stream(let stream, _): stream.value.close()
        }
    }

    /// Closes the link and waits until it is closed.
    func close() async {
        switch self.carrier {
        case .channel(let channel):
            try? await channel.close()
        case .http2Stream(let stream, _):
            if self.eventLoop.inEventLoop {
                stream.value.close()
            } else {
                try? await self.eventLoop.submit { stream.value.close() }.get()
            }
        }
    }
}

/// The event-loop half of a ``ResponderLink``. Every method runs on ``eventLoop``.
protocol ResponderLinkEnd: AnyObject, SendableMetatype {
    var eventLoop: any EventLoop { get }
    /// The next queued request part, or why there is none.
    func takePart() -> LinkTaken
    /// Waits for the next part (``takePart()`` said `.empty`); at most one waiter at a time.
    func wait(_ waiter: LinkWaiter<HTTPRequestPart?>)
    /// Writes and flushes `parts`; returns whether the link can take more right away.
    func write(_ parts: some Sequence<HTTPResponsePart>) throws -> Bool
    /// Resumes `waiter` once the link can take more (at once if it can now).
    func waitForWritability(_ waiter: LinkWaiter<Void>)
    /// The task reading the request was cancelled: its wait for a part fails with
    /// `CancellationError` (a task writing the answer beside it is not disturbed).
    func cancelPartWaiter()
    /// The task writing the answer was cancelled: its wait for writability fails with
    /// `CancellationError`.
    func cancelWritabilityWaiters()
    /// See ``ResponderLink/resetAfterCompleteAnswer()``; nothing on an HTTP/1.1 link.
    func resetAfterCompleteAnswer()
}

extension ResponderLinkEnd {
    /// ``takePart()`` and ``wait(_:)`` for a task off the event loop.
    func nextPart() -> EventLoopFuture<HTTPRequestPart?> {
        let eventLoop = self.eventLoop
        switch self.takePart() {
        case .part(let part): return eventLoop.makeSucceededFuture(part)
        case .end: return eventLoop.makeSucceededFuture(nil)
        case .failed(let error): return eventLoop.makeFailedFuture(error)
        case .empty:
            let promise = eventLoop.makePromise(of: HTTPRequestPart?.self)
            self.wait(.promise(promise))
            return promise.futureResult
        }
    }

    /// ``write(_:)`` and ``waitForWritability(_:)`` for a task off the event loop.
    func writeThenWaitForWritability(_ parts: some Sequence<HTTPResponsePart>) -> EventLoopFuture<Void> {
        let eventLoop = self.eventLoop
        do {
            if try self.write(parts) { return eventLoop.makeSucceededVoidFuture() }
        } catch {
            return eventLoop.makeFailedFuture(error)
        }
        let promise = eventLoop.makePromise(of: Void.self)
        self.waitForWritability(.promise(promise))
        return promise.futureResult
    }
}

/// What ``ResponderLinkEnd/takePart()`` found.
enum LinkTaken {
    case part(HTTPRequestPart)
    case empty
    case end
    case failed(any Error)
}

/// A task waiting on a link: a continuation (a task on the event loop) or a promise (one off it).
enum LinkWaiter<Value: Sendable> {
    case continuation(CheckedContinuation<Value, any Error>)
    case promise(EventLoopPromise<Value>)

    func resume(with result: Result<Value, any Error>) {
        switch self {
        case .continuation(let continuation): continuation.resume(with: result)
        case .promise(let promise): promise.completeWith(result)
        }
    }
}

/// Whether the task behind one wait of a ``ResponderLink`` was cancelled, readable from the
/// event loop: the cancellation handler sets it before it queues the cancel of the wait, so the
/// event loop either sees it before the wait begins or finds the wait to cancel.
final class WaitCancellation: Sendable {
    private let flag = Atomic<Bool>(false)

    var isCancelled: Bool { self.flag.load(ordering: .acquiring) }

    func cancel() { self.flag.store(true, ordering: .releasing) }
}
