import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// Installs the responder's handlers on a channel and wraps it for the link's task.
enum ResponderPipeline {

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
        try sync.addHandler(HTTP1ServerPartConverter())
        let handler = ResponderLinkHandler(eventLoop: channel.eventLoop)
        try sync.addHandler(handler)
        return ResponderLink(channel: channel, handler: handler)
    }
}
