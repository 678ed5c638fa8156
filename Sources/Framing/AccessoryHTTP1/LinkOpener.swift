import AccessoryTransport
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import Synchronization

/// Opens a link's byte stream pair and builds its pipeline (guard, NIOHTTP1's encoder and
/// decoder with the configured limits, the link handler), within the open timeout and the
/// caller's cancellation; or builds it anew on a stream renewed in band.
struct LinkOpener: Sendable {
    let transport: any ByteStreamTransport
    let configuration: LinkConfiguration
    let eventLoop: any EventLoop
    /// Where an open that timed out goes on ending (the link's shutdown waits for it).
    let stragglers: OpenStragglers

    /// - Parameter discardingInput: start the guard in discard mode, so that stale bytes that
    ///   arrive before ``HTTPLinkHandler/settle()`` takes over are dropped, not reported as stray.
    func open(discardingInput: Bool) async throws -> (stream: OpenedByteStream, pipeline: LinkPipeline) {
        let transport = self.transport
        let configure = self.configure(discardingInput: discardingInput)
        do {
            let opened = try await Self.race(
                "opening \(transport)",
                timeout: self.configuration.openTimeout,
                stragglers: self.stragglers,
                cancelled: "the request was cancelled while the link was opening",
                discard: { opened in
                    opened.stream.channel.close(promise: nil)
                    await opened.stream.waitUntilReleased()
                },
                { try await transport.open(on: self.eventLoop, building: configure) }
            )
            return (opened.stream, opened.output)
        } catch {
            throw Self.linkError(error, doing: "open \(transport)")
        }
    }

    /// Starts a new stream on `stream`, which the link gave up but which stayed open (a session
    /// restarted in band, ``OpenedByteStream/renewal``): `old`'s handlers leave the pipeline and
    /// fresh ones are built, within the open timeout. On failure the caller closes the stream.
    func renew(_ stream: OpenedByteStream, replacing old: LinkPipeline) async throws -> LinkPipeline {
        let configure = self.configure(discardingInput: false)
        let channel = stream.channel
        do {
            try await self.eventLoop.flatSubmit {
                let sync = channel.pipeline.syncOperations
                let removals = old.handlers.value.compactMap { try? sync.context(handler: $0) }.map {
                    sync.removeHandler(context: $0)
                }
                return EventLoopFuture.andAllSucceed(removals, on: channel.eventLoop)
            }.get()
            return try await Self.race(
                "restarting the session on \(self.transport)",
                timeout: self.configuration.openTimeout,
                stragglers: self.stragglers,
                cancelled: "the request was cancelled while the link was restarting its session",
                discard: { _ in
                    channel.close(promise: nil)
                    await stream.waitUntilReleased()
                },
                { try await stream.renew(building: configure) }
            )
        } catch {
            throw Self.linkError(error, doing: "restart the session on \(self.transport)")
        }
    }

    private static func linkError(_ error: any Error, doing what: String) -> HTTPLinkError {
        switch error {
        case let error as HTTPLinkError: return error
        // A transport that timed out opening (a socket's connect, a phone that did not come back
        // in accessory mode) is the link's open timeout: exit status 75, like the link's own.
        case let error as TransportError where error.code == .openTimedOut:
            return HTTPLinkError(.openTimeout, error.message, underlying: error)
        case let error as TransportError: return HTTPLinkError(.transportFailed, error.message, underlying: error)
        default: return HTTPLinkError(.transportFailed, "could not \(what): \(error)", underlying: error)
        }
    }

    /// Builds a link's pipeline on a channel (on its event loop, before it reads).
    private func configure(discardingInput: Bool) -> @Sendable (any Channel) -> EventLoopFuture<LinkPipeline> {
        let configuration = self.configuration
        let eventLoop = self.eventLoop
        let closesAbandonedStreams = self.transport.opensIndependentStreams
        return { channel in
            do {
                try channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
                try channel.syncOptions?.setOption(
                    ChannelOptions.recvAllocator,
                    value: AdaptiveRecvByteBufferAllocator(
                        minimum: 1024,
                        initial: 16 * 1024,
                        maximum: HTTPLinkHandler.maximumReadSize
                    )
                )
                let (handlers, linkHandler) = Self.linkHandlers(
                    configuration: configuration,
                    eventLoop: eventLoop,
                    closesAbandonedStreams: closesAbandonedStreams,
                    discardingInput: discardingInput
                )
                try channel.pipeline.syncOperations.addHandlers(handlers)
                return channel.eventLoop.makeSucceededFuture(
                    LinkPipeline(
                        linkHandler: NIOLoopBound(linkHandler, eventLoop: eventLoop),
                        handlers: NIOLoopBound(handlers, eventLoop: eventLoop)
                    )
                )
            } catch {
                return channel.eventLoop.makeFailedFuture(error)
            }
        }
    }

    /// The handlers of a link's pipeline, bottom up, and the link handler at their top: the
    /// guard, NIOHTTP1's request encoder and response decoder (with the configured limits), the
    /// decompressor when asked for. The fuzz target of the response path builds exactly these.
    static func linkHandlers(
        configuration: LinkConfiguration,
        eventLoop: any EventLoop,
        closesAbandonedStreams: Bool,
        discardingInput: Bool = false
    ) -> ([any RemovableChannelHandler], HTTPLinkHandler) {
        let guardHandler = LinkGuardHandler(maxStartLineLength: configuration.limits.maxStartLineLength)
        // The channel reads as soon as it is active, before `settle()` runs.
        if discardingInput { guardHandler.mode = .discard }
        let linkHandler = HTTPLinkHandler(
            configuration: configuration,
            guardHandler: guardHandler,
            eventLoop: eventLoop,
            closesAbandonedStreams: closesAbandonedStreams
        )
        var limits = NIOHTTPDecoderLimitConfiguration()
        limits.maxHeaderListSize = configuration.limits.maxHeaderBlockSize
        limits.maxHeaderFieldSize = configuration.limits.maxHeaderBlockSize
        limits.maxHeaderFieldCount = configuration.limits.maxHeaderCount
        let decoder = ByteToMessageHandler(
            HTTPResponseDecoder(
                leftOverBytesStrategy: .dropBytes,
                informationalResponseStrategy: .forward,
                limitConfiguration: limits
            )
        )
        var handlers: [any RemovableChannelHandler] = [guardHandler, HTTPRequestEncoder(), decoder]
        if configuration.decompressResponses {
            handlers.append(NIOHTTPResponseDecompressor(limit: .ratio(configuration.maxDecompressionRatio)))
        }
        handlers.append(linkHandler)
        return (handlers, linkHandler)
    }

    /// Runs `operation` (an open or a renewal), giving up after `timeout` or when the caller is
    /// cancelled — even if the operation ignores cancellation (a blocking `open(2)` on a stuck
    /// tty, say): the race is unstructured, and a result that comes after the caller gave up is
    /// discarded.
    ///
    /// Only a link's shutdown cancels an open (it runs in a task of its own), and a shutdown
    /// must not leave behind what the open makes (an `exec:` child, a claimed interface): a
    /// cancelled race cancels the operation too and waits up to ``cancelledOpenGrace`` for it to
    /// end, its result closed and released. An operation that ignores cancellation is left to
    /// end on its own, as before. A race that times out fails at once (the open timeout is a
    /// deadline the caller set) and leaves the cancelled operation to `stragglers`, which the
    /// link's shutdown waits for.
    private static func race<Output: Sendable>(
        _ what: String,
        timeout: Duration,
        stragglers: OpenStragglers,
        cancelled: String,
        discard: @escaping @Sendable (Output) async -> Void,
        _ operation: @escaping @Sendable () async throws -> Output
    ) async throws -> Output {
        let outcome = OpenOutcome<Output>()
        let opening = Task {
            do {
                let opened = try await operation()
                if !outcome.resume(with: .success(opened)) { await discard(opened) }
            } catch {
                outcome.resume(with: .failure(error))
            }
        }
        let timer = Task {
            try await Task.sleep(for: timeout)
            if outcome.resume(with: .failure(HTTPLinkError(.openTimeout, "\(what) took longer than \(timeout)"))) {
                opening.cancel()
                stragglers.track(opening)
            }
        }
        outcome.onFinish { timer.cancel() }
        let wasCancelled = Atomic<Bool>(false)
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Output, any Error>) in
                    outcome.install(continuation)
                }
            } onCancel: {
                if outcome.resume(with: .failure(HTTPLinkError(.cancelled, cancelled))) {
                    wasCancelled.store(true, ordering: .relaxed)
                    opening.cancel()
                }
            }
        } catch {
            if wasCancelled.load(ordering: .relaxed) {
                await waitForTasks([opening], atMost: Self.cancelledOpenGrace)
            }
            throw error
        }
    }

    /// How long a cancelled open is waited for (see ``race(_:timeout:cancelled:discard:_:)``).
    static let cancelledOpenGrace: Duration = .seconds(2)

}

/// Waits for `opening` until `deadline` or the caller's cancellation, whichever comes first
/// (failing with `exchange-timeout` and `expired`, or `cancelled`); `opening` goes on either way,
/// unlike `opening.value`, which a cancelled caller would still wait out. Its own failure is
/// the caller's. Shared by the HTTP/1.1 and HTTP/2 links, whose opens outlive the request that
/// started them.
package func waitForOpen<Output: Sendable>(
    _ opening: Task<Output, any Error>,
    until deadline: NIODeadline?,
    expired: @autoclosure () -> String = "",
    cancelled: String
) async throws -> Output {
    let outcome = OpenOutcome<Output>()
    let expiredError = HTTPLinkError(.exchangeTimeout, expired())
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Output, any Error>) in
            outcome.install(continuation)
            Task { outcome.resume(with: await opening.result) }
            guard let deadline else { return }
            let timer = Task {
                try await Task.sleep(for: .nanoseconds(max(0, (deadline - .now()).nanoseconds)))
                outcome.resume(with: .failure(expiredError))
            }
            outcome.onFinish { timer.cancel() }
        }
    } onCancel: {
        outcome.resume(with: .failure(HTTPLinkError(.cancelled, cancelled)))
    }
}

/// What a link built in a stream's pipeline: its handlers, bottom up (removed when the stream
/// is renewed), the last of which is the link handler.
struct LinkPipeline: Sendable {
    let linkHandler: NIOLoopBound<HTTPLinkHandler>
    let handlers: NIOLoopBound<[any RemovableChannelHandler]>
}

/// The first of "opened", "failed", "timed out" and "cancelled" wins; the others are ignored.
private final class OpenOutcome<Value: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Value, any Error>?
        var early: Result<Value, any Error>?
        var done = false
        var onFinish: (@Sendable () -> Void)?
    }

    private let state = TrackedMutex(State())

    func install(_ continuation: CheckedContinuation<Value, any Error>) {
        let early: Result<Value, any Error>? = self.state.withLock { state in
            if let early = state.early { return early }
            state.continuation = continuation
            return nil
        }
        if let early { continuation.resume(with: early) }
    }

    func onFinish(_ body: @escaping @Sendable () -> Void) {
        let runNow: Bool = self.state.withLock { state in
            if state.done && state.continuation == nil { return true }
            state.onFinish = body
            return false
        }
        if runNow { body() }
    }

    /// Returns whether this result won.
    @discardableResult
    func resume(with result: Result<Value, any Error>) -> Bool {
        let (won, continuation, finish): (Bool, CheckedContinuation<Value, any Error>?, (@Sendable () -> Void)?) =
            self.state.withLock { state in
                guard !state.done else { return (false, nil, nil) }
                state.done = true
                if state.continuation == nil { state.early = result }
                defer { state.continuation = nil }
                return (true, state.continuation, state.onFinish)
            }
        continuation?.resume(with: result)
        finish?()
        return won
    }
}
