import NIOCore
import NIOHTTP1

/// The answers the bridge gives itself (status, refusals, the accessory's failures), each a
/// complete response with its own framing: the encoder's automatic framing is off, since
/// forwarded responses keep the accessory's.
struct BridgeResponse: Sendable {
    var status: HTTPResponseStatus
    var body: String
    var contentType = "text/plain; charset=utf-8"
    var extraHeaders: [(String, String)] = []
    /// The statistics' name for this kind of error, if it is one.
    var errorKind: String?

    static func error(_ status: HTTPResponseStatus, kind: String, _ message: String) -> BridgeResponse {
        BridgeResponse(status: status, body: message + "\n", errorKind: kind)
    }

    func parts(version: HTTPVersion, close: Bool, forHEAD: Bool) -> [HTTPServerResponsePart] {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: self.contentType)
        headers.add(name: "Content-Length", value: String(self.body.utf8.count))
        headers.add(name: "Cache-Control", value: "no-store")
        for (name, value) in self.extraHeaders { headers.add(name: name, value: value) }
        if close { headers.add(name: "Connection", value: "close") }
        var parts: [HTTPServerResponsePart] = [
            .head(HTTPResponseHead(version: version, status: self.status, headers: headers))
        ]
        if !forHEAD { parts.append(.body(.byteBuffer(ByteBuffer(string: self.body)))) }
        parts.append(.end(nil))
        return parts
    }
}
