import AccessoryTransport
import NIOCore
import NIOHTTP1
import NIOHTTPCompression

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
    ///   - releases: waited for first, within the open timeout (see ``ReleaseWait``).
    func open(discardingInput: Bool, after releases: ReleaseWait = ReleaseWait([])) async throws -> (
        stream: OpenedByteStream, pipeline: LinkPipeline
    ) {
        let transport = self.transport
        let configure = self.configure(discardingInput: discardingInput)
        do {
            let opened = try await raceOpen(
                "opening \(transport)",
                timeout: self.configuration.openTimeout,
                stragglers: self.stragglers,
                cancelled: "the request was cancelled while the link was opening",
                timeoutNote: { releases.note },
                discard: { opened in
                    opened.stream.channel.close(promise: nil)
                    await opened.stream.waitUntilReleased()
                },
                { () async throws -> (stream: OpenedByteStream, output: LinkPipeline) in
                    await releases.run()
                    // A race given up meanwhile (the open timeout, a shutdown) would only close
                    // what it opened: the device is not opened at all.
                    try Task.checkCancellation()
                    return try await transport.open(on: self.eventLoop, building: configure)
                }
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
            return try await raceOpen(
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

}

/// What a link built in a stream's pipeline: its handlers, bottom up (removed when the stream
/// is renewed), the last of which is the link handler.
struct LinkPipeline: Sendable {
    let linkHandler: NIOLoopBound<HTTPLinkHandler>
    let handlers: NIOLoopBound<[any RemovableChannelHandler]>
}
