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

    public var status: HTTPResponse.Status { self.head.status }
}

/// How much of a transfer is done.
public struct TransferProgress: Sendable, Hashable {
    public var bytesTransferred: Int64
    /// The total from `Content-Length`, when the device sent one.
    public var totalBytes: Int64?

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
    /// A request body: none, bytes, or a stream (``HTTPRequestBody``).
    public typealias Body = HTTPRequestBody
}

extension AccessoryResponse {
    /// A response body, read with back-pressure (``HTTPResponseBody``).
    public typealias Body = HTTPResponseBody
}

extension HTTPRequestBody {
    /// What a streamed request body's producer writes to (``RequestBodyWriter``).
    public typealias Writer = RequestBodyWriter
}
