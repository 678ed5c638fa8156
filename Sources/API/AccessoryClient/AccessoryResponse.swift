import AccessoryHTTP1
import HTTPTypes

/// A response whose head has arrived; its body streams from the device as it is read.
public struct AccessoryResponse: Sendable {
    /// The final response head (after redirects and authentication were handled).
    public let head: HTTPResponse
    /// The body, read from the device with back-pressure. Leave it unread and it is drained.
    public let body: HTTPResponseBody
    /// The path the response came from, after redirects.
    public let path: String
    /// How many redirects were followed to get here.
    public let redirectCount: Int

    /// The response status, from ``head``.
    public var status: HTTPResponse.Status { self.head.status }
}

/// How much of a transfer is done.
public struct TransferProgress: Sendable, Hashable {
    /// How many body bytes have been transferred so far.
    public var bytesTransferred: Int64
    /// The total, when known: the response's `Content-Length` for a download (unknown for a body
    /// the link decodes, `LinkConfiguration.decompressResponses`, whose length counts the
    /// compressed bytes), the file's size for an upload.
    public var totalBytes: Int64?

    /// The progress of a transfer at one moment.
    ///
    /// - Parameters:
    ///   - bytesTransferred: how many body bytes have been transferred so far.
    ///   - totalBytes: the total, or `nil` when it is not known.
    public init(bytesTransferred: Int64, totalBytes: Int64?) {
        self.bytesTransferred = bytesTransferred
        self.totalBytes = totalBytes
    }

    /// 0…1, when the total is known.
    public var fractionCompleted: Double? {
        guard let totalBytes, totalBytes > 0 else { return nil }
        return Double(self.bytesTransferred) / Double(totalBytes)
    }
}

// The body types, by the name of what they belong to: one place to look for each side.

extension AccessoryRequest {
    /// A request body: none, bytes, or a stream (`HTTPRequestBody`, module AccessoryHTTP1).
    public typealias Body = HTTPRequestBody
}

extension AccessoryResponse {
    /// A response body, read with back-pressure (`HTTPResponseBody`, module AccessoryHTTP1).
    public typealias Body = HTTPResponseBody
}

/// The writer of a streamed request body, under the name of the body it belongs to.
extension HTTPRequestBody {
    /// What a streamed request body's producer writes to (`RequestBodyWriter`, module
    /// AccessoryHTTP1).
    public typealias Writer = RequestBodyWriter
}
