import AccessoryHTTP1
import NIOCore
import NIOHTTP1
import NIOHTTPCompression

/// Sits after NIO's response decompressor on a stream that decodes compressed responses
/// (`LinkConfiguration.decompressResponses`) and makes its failures the link's errors.
///
/// - A body that cannot be decoded (a decompression bomb, bad data, a truncated body) fails the
///   exchange with the same `HTTPLinkError` as on an HTTP/1.1 link, and nothing of the stream
///   after the failure passes on: the decompressor passes the response's end after its error,
///   which would otherwise deliver the broken body as complete.
/// - An answer without a body (to `HEAD`, or a 204 or 304) that names a Content-Encoding is
///   "truncated" to the decompressor; there was nothing to decode, so that is no error.
///
/// Every method runs on the stream's event loop.
final class DecompressionFailureHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias InboundOut = HTTPClientResponsePart

    private var bodiless: Bool
    private var failed = false

    /// - Parameter isHeadRequest: whether the stream's request is a `HEAD`, whose answer has
    ///   no body whatever its head says.
    init(isHeadRequest: Bool) {
        self.bodiless = isHeadRequest
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.failed else { return }
        if case .head(let head) = self.unwrapInboundIn(data), head.status == .noContent || head.status == .notModified {
            self.bodiless = true
        }
        context.fireChannelRead(data)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard !self.failed else { return }
        if self.bodiless, error as? NIOHTTPDecompression.ExtraDecompressionError == .truncatedData { return }
        guard let failure = HTTPLinkError.decompressionFailure(error) else {
            context.fireErrorCaught(error)
            return
        }
        self.failed = true
        context.fireErrorCaught(failure)
        // Resets the stream: the rest of this body is of no use, and the device stops sending it.
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension DecompressionFailureHandler: Sendable {}
