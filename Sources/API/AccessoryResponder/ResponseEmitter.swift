import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Writes one response onto a link: adds the framing and `Server`/`Connection` headers, leaves
/// the body out where HTTP forbids one, and streams bodies with back-pressure.
struct ResponseEmitter: Sendable {
    /// How the write ended.
    enum Outcome: Sendable {
        /// The whole response went out; the link is still in step.
        case completed
        /// The body producer failed before the head left: a different response may still be sent.
        case failedBeforeHead
        /// The response was cut off; the link must close.
        case broken
    }

    let link: ResponderLink
    let serverName: String?
    /// The link is an HTTP/2 stream: no connection-specific field may go out (RFC 9113 §8.2.2;
    /// NIOHTTP2Handler resets a stream whose head carries one).
    var http2 = false

    /// The fields HTTP/2 forbids in a message (RFC 9113 §8.2.2).
    static let connectionSpecificFields: [HTTPField.Name] =
        [.connection, .transferEncoding, .upgrade]
        + ["Keep-Alive", "Proxy-Connection"].compactMap { HTTPField.Name($0) }

    func emit(_ response: ResponderResponse, requestMethod: HTTPRequest.Method, keepAlive: Bool) async -> Outcome {
        var head = response.head
        if let serverName = self.serverName, head.headerFields[.server] == nil {
            head.headerFields[.server] = serverName
        }
        if self.http2 {
            // A handler's own `Connection: close` (or `Keep-Alive`) would get the stream reset
            // instead of answered; the stream's end is the end of this exchange anyway.
            for name in Self.connectionSpecificFields { head.headerFields[name] = nil }
        } else if !keepAlive {
            head.headerFields[.connection] = "close"
        }
        let code = head.status.code
        let statusForbidsBody = (100..<200).contains(code) || code == 204 || code == 304
        let sendsBody = !statusForbidsBody && requestMethod != .head

        do {
            switch response.body {
            case .empty:
                if !statusForbidsBody && (requestMethod != .head || head.headerFields[.contentLength] == nil) {
                    Self.setLength(0, in: &head)
                }
                try await self.link.write(contentsOf: CollectionOfTwo(.head(head), .end(nil)))
            case .bytes(let buffer):
                if !statusForbidsBody {
                    Self.setLength(buffer.readableBytes, in: &head)
                }
                if sendsBody && buffer.readableBytes > 0 {
                    try await self.link.write(contentsOf: CollectionOfThree(.head(head), .body(buffer), .end(nil)))
                } else {
                    try await self.link.write(contentsOf: CollectionOfTwo(.head(head), .end(nil)))
                }
            case .stream(let length, let produce):
                let length = length.flatMap { $0 >= 0 ? $0 : nil }
                if !statusForbidsBody {
                    if let length {
                        Self.setLength(length, in: &head)
                    } else {
                        // No length: the encoder frames the body as chunked.
                        head.headerFields[.contentLength] = nil
                    }
                }
                guard sendsBody else {
                    try await self.link.write(contentsOf: CollectionOfTwo(.head(head), .end(nil)))
                    return .completed
                }
                let stream = ResponseBodyStream(link: self.link, head: head, declaredLength: length)
                do {
                    try await produce(ResponseBodyWriter(stream: stream))
                    try await stream.finish()
                } catch {
                    stream.close()
                    return stream.headWasSent ? .broken : .failedBeforeHead
                }
            }
            return .completed
        } catch {
            return .broken
        }
    }

    private static func setLength(_ length: Int, in head: inout HTTPResponse) {
        head.headerFields[.contentLength] = String(length)
        head.headerFields[.transferEncoding] = nil
    }
}
