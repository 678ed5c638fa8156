import AccessoryHTTP2
import AccessorySession
import AccessoryTransport
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOHTTPTypes
import NIOHTTPTypesHTTP2

/// Handlers every stream of a link gets between the session layer and HTTP, made fresh for each
/// stream: a TLS server handler, so that each session is a TLS connection of its own (TLS inside
/// the session layer). Called on the channel's event loop; returns the handlers it added, which
/// are removed when the stream ends.
public typealias ResponderStreamLayer = @Sendable (any Channel) throws -> [any RemovableChannelHandler]

/// The stream-layer handlers of a link's current stream. Event loop only.
final class StreamLayerHandlers {
    var handlers: [any RemovableChannelHandler] = []
}

/// A link as its serving task gets it: the HTTP side, and the session layer below it if any.
struct ServedLink: Sendable {
    let channel: any Channel
    /// What the first bytes of the stream asked for.
    var negotiated: EventLoopFuture<NegotiatedLink>
    let session: NIOLoopBound<SessionResponderHandler>?
    let streamLayer: ResponderStreamLayer?
    let streamHandlers: NIOLoopBound<StreamLayerHandlers>
    /// Closes the transport gracefully after a shutdown began; not in the pipeline until then.
    let transportClose: NIOLoopBound<GracefulTransportClose>
}

/// Installs the responder's handlers on a channel and wraps it for the link's task.
enum ResponderPipeline {

    /// The session layer (when the configuration accepts sessions and `sessions` is true) and
    /// the HTTP handlers above it, and the handler that will close the transport gracefully
    /// once a shutdown begins (`halfCloses`: the transport is a socket; `sendQueue`: its kernel
    /// send queue, when known). Must run on the channel's event loop.
    static func configureLink(
        _ channel: any Channel,
        configuration: ResponderConfiguration,
        sessions: Bool = true,
        halfCloses: Bool = false,
        sendQueue: KernelSendQueue? = nil,
        streamLayer: ResponderStreamLayer? = nil
    ) throws -> ServedLink {
        // Made now, added to the bottom of the pipeline only when a shutdown begins: until then
        // it would be one more handler every byte of the link passes.
        let transportClose = GracefulTransportClose(halfCloses: halfCloses, lingerBound: .seconds(2))
        transportClose.sendQueue = sendQueue
        let session = sessions ? try self.addSessionLayer(channel, configuration: configuration) : nil
        // A stream layer's connection (TLS) ends without the line: the next host starts anew.
        if streamLayer != nil { session?.plainStreamsEndAlone = true }
        let streamHandlers = StreamLayerHandlers()
        streamHandlers.handlers = try streamLayer?(channel) ?? []
        return ServedLink(
            channel: channel,
            negotiated: try self.addDetector(channel, configuration: configuration),
            session: session.map { NIOLoopBound($0, eventLoop: channel.eventLoop) },
            streamLayer: streamLayer,
            streamHandlers: NIOLoopBound(streamHandlers, eventLoop: channel.eventLoop),
            transportClose: NIOLoopBound(transportClose, eventLoop: channel.eventLoop)
        )
    }

    /// Adds the detector that installs HTTP/1.1 or HTTP/2 handlers on the stream's first bytes.
    static func addDetector(
        _ channel: any Channel,
        configuration: ResponderConfiguration
    ) throws -> EventLoopFuture<NegotiatedLink> {
        let promise = channel.eventLoop.makePromise(of: NegotiatedLink.self)
        do {
            try channel.pipeline.syncOperations.addHandler(
                HTTPVersionDetector(configuration: configuration, promise: promise)
            )
        } catch {
            promise.fail(error)
            throw error
        }
        return promise.futureResult
    }

    /// HTTP/2 with prior knowledge: NIOHTTP2Handler, the frame-level request streams above it
    /// (each served as a ``ResponderLink`` by the same loop an HTTP/1.1 link has), and the
    /// handler that ends the connection.
    static func configureHTTP2(
        _ channel: any Channel,
        configuration: ResponderConfiguration
    ) throws -> NIOLoopBound<HTTP2ServerStreams> {
        // The host's large connection window (a link serves one host, it has nobody to be fair
        // to), and a smaller stream window: what an upload's handler has not read yet must drain
        // within the host's idle bound (HTTP2Windows.responderStream).
        var settings = HTTP2Windows.configuration(streamWindow: HTTP2Windows.responderStream)
        settings.connection.initialSettings += [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: 100),
            HTTP2Setting(parameter: .maxHeaderListSize, value: max(1024, configuration.maxHeaderBlockSize)),
        ]
        let streams = HTTP2ServerStreams(eventLoop: channel.eventLoop, connectionWindow: HTTP2Windows.connection)
        try channel.pipeline.syncOperations.addHandlers(
            NIOHTTP2Handler(
                mode: .server,
                connectionConfiguration: settings.connection,
                streamConfiguration: settings.stream
            ),
            streams,
            HTTP2ConnectionEnd(shutdownBound: TimeAmount(configuration.shutdownGrace))
        )
        return NIOLoopBound(streams, eventLoop: channel.eventLoop)
    }

    /// Must run on the channel's event loop, before the channel is active.
    ///
    /// `configureHTTPServerPipeline` is used (not a hand-made encoder/decoder pair) because it
    /// is the only way to pair the decoder with the encoder: the decoder then tells the encoder
    /// which requests were `HEAD`, and the encoder suppresses those responses' bodies, including
    /// the chunked terminator. Its error handler and pipelining helper are left out: the link
    /// loop answers protocol errors itself (with 431 where it applies) and serves requests
    /// strictly in order. NIO's outbound header validation is left out too: every response head
    /// comes from swift-http-types, whose field names are checked tokens and whose values are
    /// legalised on construction (CR, LF and NUL cannot get in), so it would check again what
    /// cannot be wrong, at a measurable cost per response.
    static func configure(_ channel: any Channel, configuration: ResponderConfiguration) throws -> ResponderLink {
        var limits = NIOHTTPDecoderLimitConfiguration()
        let blockSize = max(1024, configuration.maxHeaderBlockSize)
        limits.maxHeaderFieldSize = blockSize
        limits.maxHeaderListSize = blockSize
        limits.maxHeaderFieldCount = max(1, configuration.maxHeaderCount)

        let sync = channel.pipeline.syncOperations
        try sync.configureHTTPServerPipeline(
            withPipeliningAssistance: false,
            withServerUpgrade: nil,
            withErrorHandling: false,
            withOutboundHeaderValidation: false,
            withEncoderConfiguration: .init(),
            withDecoderLimitConfiguration: limits
        )
        try sync.addHandler(HTTP1ServerPartConverter(shutdownBound: TimeAmount(configuration.shutdownGrace)))
        let handler = ResponderLinkHandler(eventLoop: channel.eventLoop)
        try sync.addHandler(handler)
        return ResponderLink(channel: channel, handler: handler)
    }

    /// Adds the session layer below the HTTP handlers (docs/framing.md §6), when the
    /// configuration accepts sessions. Must run before ``configure(_:configuration:)``.
    static func addSessionLayer(
        _ channel: any Channel,
        configuration: ResponderConfiguration
    ) throws -> SessionResponderHandler? {
        guard configuration.acceptsSessions else { return nil }
        let handler = SessionResponderHandler(tracer: configuration.sessionTracer)
        try channel.pipeline.syncOperations.addHandler(handler)
        return handler
    }

    /// Replaces the HTTP handlers with fresh ones for the next stream on the same transport (the
    /// session layer ended the previous one). Must run on the channel's event loop; the new
    /// handlers are added once the old ones have left (a decoder leaves on a later tick).
    static func rebuild(
        _ channel: any Channel,
        configuration: ResponderConfiguration,
        streamLayer: ResponderStreamLayer? = nil,
        streamHandlers: StreamLayerHandlers = StreamLayerHandlers()
    ) -> EventLoopFuture<EventLoopFuture<NegotiatedLink>> {
        let sync = channel.pipeline.syncOperations
        // Whatever the last stream had above the session layer: the detector if no byte came,
        // else HTTP/1.1's four handlers (configureHTTPServerPipeline adds exactly an encoder and
        // a decoder with these options) or HTTP/2's three.
        let contexts =
            [
                try? sync.context(handlerType: HTTPVersionDetector.self),
                try? sync.context(handlerType: ResponderLinkHandler.self),
                try? sync.context(handlerType: HTTP1ServerPartConverter.self),
                try? sync.context(handlerType: ByteToMessageHandler<HTTPRequestDecoder>.self),
                try? sync.context(handlerType: HTTPResponseEncoder.self),
                try? sync.context(handlerType: NIOHTTP2Handler.self),
                try? sync.context(handlerType: HTTP2ServerStreams.self),
                try? sync.context(handlerType: HTTP2ConnectionEnd.self),
            ].compactMap { $0 } + streamHandlers.handlers.compactMap { try? sync.context(handler: $0) }
        streamHandlers.handlers = []
        let removals = contexts.map { sync.removeHandler(context: $0) }
        // The future completes on the channel's event loop, where the holder belongs.
        let boundHandlers = NIOLoopBound(streamHandlers, eventLoop: channel.eventLoop)
        return EventLoopFuture.andAllSucceed(removals, on: channel.eventLoop).flatMapThrowing {
            boundHandlers.value.handlers = try streamLayer?(channel) ?? []
            return try self.addDetector(channel, configuration: configuration)
        }
    }
}
