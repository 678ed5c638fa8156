import NIOHTTPCompression

extension HTTPLinkError {
    /// The link's error for a failure of NIO's response decompressor (`decompressResponses`):
    /// a decompression bomb, a body that cannot be decoded, or one truncated or with bytes after
    /// its end; `nil` for any other error. Shared by the HTTP/1.1 and HTTP/2 links, so a caller
    /// reads the same sentence whichever the link speaks.
    package static func decompressionFailure(_ error: any Error) -> HTTPLinkError? {
        if let inflation = error as? NIOHTTPDecompression.DecompressionError {
            if inflation == .limit {
                return HTTPLinkError(
                    .responseTooLarge,
                    "the device's compressed body inflates more than the configured ratio "
                        + "(LinkConfiguration.maxDecompressionRatio): refused as a decompression bomb",
                    underlying: error
                )
            }
            return HTTPLinkError(
                .malformedResponse,
                "the device's compressed body (Content-Encoding) could not be decoded (\(inflation))",
                underlying: error
            )
        }
        if error is NIOHTTPDecompression.ExtraDecompressionError {
            return HTTPLinkError(
                .malformedResponse,
                "the device's compressed body (Content-Encoding) is truncated or has bytes after its end",
                underlying: error
            )
        }
        return nil
    }
}
