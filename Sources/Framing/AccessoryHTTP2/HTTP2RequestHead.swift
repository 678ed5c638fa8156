import AccessoryHTTP1
import HTTPTypes

/// The request head as HTTP/2 sends it: `:scheme` and `:authority` set, and none of the
/// fields that are HTTP/1.1's connection business (RFC 9113 §8.2.2), which an HTTP/2 peer must
/// refuse.
enum HTTP2RequestHead {
    static func make(_ request: HTTPRequest, body: HTTPRequestBody, configuration: LinkConfiguration) -> HTTPRequest {
        var head = request
        if head.scheme == nil { head.scheme = "http" }
        if head.authority == nil { head.authority = configuration.host }
        for name in [HTTPField.Name.connection, .transferEncoding, .upgrade] {
            head.headerFields[name] = nil
        }
        for name in ["Host", "Keep-Alive", "Proxy-Connection"].compactMap({ HTTPField.Name($0) }) {
            head.headerFields[name] = nil
        }
        if head.headerFields[.contentLength] == nil, let length = body.knownLength,
            length > 0 || head.method == .post || head.method == .put
        {
            head.headerFields[.contentLength] = String(length)
        }
        return head
    }
}
