import AccessoryTransport
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import Synchronization

/// Opens a link's byte stream pair and builds its pipeline (guard, NIOHTTP1's encoder and
/// decoder with the configured limits, the link handler), within the open timeout and the
/// caller's cancellation.
struct LinkOpener: Sendable {
    let transport: any ByteStreamTransport
    let configuration: LinkConfiguration
    let eventLoop: any EventLoop

    /// - Parameter discardingInput: start the guard in discard mode, so that stale bytes that
    ///   arrive before ``HTTPLinkHandler/settle()`` takes over are dropped, not reported as stray.
    func open(discardingInput: Bool) async throws -> (stream: OpenedByteStream, handler: NIOLoopBound<HTTPLinkHandler>)
    {
        let configuration = self.configuration
        let eventLoop = self.eventLoop
        let transport = self.transport
        let closesAbandonedStreams = transport.opensIndependentStreams
        let timeout = configuration.openTimeout
        let opened: (stream: OpenedByteStream, output: NIOLoopBound<HTTPLinkHandler>)
        do {
            let configure: @Sendable (any Channel) -> EventLoopFuture<NIOLoopBound<HTTPLinkHandler>> = { channel in
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
                    try channel.pipeline.syncOperations.addHandlers([guardHandler, HTTPRequestEncoder(), decoder])
                    if configuration.decompressResponses {
                        try channel.pipeline.syncOperations.addHandler(
                            NIOHTTPResponseDecompressor(limit: .ratio(configuration.maxDecompressionRatio))
                        )
                    }
                    try channel.pipeline.syncOperations.addHandler(linkHandler)
                    return channel.eventLoop.makeSucceededFuture(NIOLoopBound(linkHandler, eventLoop: eventLoop))
                } catch {
                    return channel.eventLoop.makeFailedFuture(error)
                }
            }
            opened = try await Self.open(transport, on: eventLoop, timeout: timeout, configure: configure)
        } catch let error as HTTPLinkError {
            throw error
        } catch let error as TransportError {
            throw HTTPLinkError(.transportFailed, error.message, underlying: error)
        } catch {
            throw HTTPLinkError(.transportFailed, "could not open \(transport): \(error)", underlying: error)
        }
        return (opened.stream, opened.output)
    }

    /// Opens `transport`, giving up after `timeout` or when the caller is cancelled — even if the
    /// transport's `open` ignores cancellation (a blocking `open(2)` on a stuck tty, say): the
    /// race is unstructured, and a stream that opens after the caller gave up is closed.
    private static func open<Output: Sendable>(
        _ transport: any ByteStreamTransport,
        on eventLoop: any EventLoop,
        timeout: Duration,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Output>
    ) async throws -> (stream: OpenedByteStream, output: Output) {
        let outcome = OpenOutcome<(stream: OpenedByteStream, output: Output)>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<(stream: OpenedByteStream, output: Output), any Error>) in
                outcome.install(continuation)
                let opening = Task {
                    do {
                        let opened = try await transport.open(on: eventLoop, building: configure)
                        if !outcome.resume(with: .success(opened)) { opened.stream.channel.close(promise: nil) }
                    } catch {
                        outcome.resume(with: .failure(error))
                    }
                }
                let timer = Task {
                    try await Task.sleep(for: timeout)
                    if outcome.resume(
                        with: .failure(HTTPLinkError(.openTimeout, "opening \(transport) took longer than \(timeout)"))
                    ) {
                        opening.cancel()
                    }
                }
                outcome.onFinish { timer.cancel() }
            }
        } onCancel: {
            outcome.resume(
                with: .failure(HTTPLinkError(.cancelled, "the request was cancelled while the link was opening"))
            )
        }
    }
}

/// The first of "opened", "failed", "timed out" and "cancelled" wins; the others are ignored.
private final class OpenOutcome<Value: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Value, any Error>?
        var early: Result<Value, any Error>?
        var done = false
        var onFinish: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())

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
