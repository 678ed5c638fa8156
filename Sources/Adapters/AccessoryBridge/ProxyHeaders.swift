import HTTPTypes
import NIOHTTP1

/// The header rules of a gateway (RFC 9110 §7.6.1): fields that describe one connection are
/// not forwarded, in either direction; the link sets its own `Host` and framing.
enum ProxyHeaders {
    /// Fields that never cross the bridge, besides those a `Connection` field names.
    static let hopByHop: Set<String> = [
        "connection", "proxy-connection", "keep-alive", "te", "transfer-encoding", "upgrade", "trailer",
        "proxy-authenticate", "proxy-authorization",
    ]

    /// The request fields to send on to the accessory: hop-by-hop fields, `Host` (the link sends
    /// the accessory's), `Expect` (the bridge answers `100-continue` itself) and `Content-Length`
    /// (the link frames the body) removed.
    static func requestFields(_ headers: HTTPHeaders) -> HTTPFields {
        Self.forwarded(headers, alsoDropping: ["host", "expect", "content-length"])
    }

    /// The response fields to send on to the client, hop-by-hop fields removed; framing is
    /// decided by ``responseHead(_:forHEAD:clientVersion:)``.
    static func responseHead(
        _ response: HTTPResponse,
        forHEAD: Bool,
        clientVersion: HTTPVersion
    ) -> (head: HTTPResponseHead, closeAfter: Bool) {
        var headers = HTTPHeaders()
        var connectionNamed: Set<String> = []
        for field in response.headerFields where field.name.canonicalName == "connection" {
            for token in field.value.split(separator: ",") {
                connectionNamed.insert(token.trimmingCharacters(in: " \t").lowercased())
            }
        }
        var contentLength: String?
        for field in response.headerFields {
            let name = field.name.canonicalName
            if Self.hopByHop.contains(name) || connectionNamed.contains(name) { continue }
            if name == "content-length" {
                contentLength = field.value
                continue
            }
            headers.add(name: field.name.rawName, value: field.value)
        }
        let code = response.status.code
        let bodyless = forHEAD || (100..<200).contains(code) || code == 204 || code == 304
        var closeAfter = false
        if let contentLength, code != 204, !(100..<200).contains(code) {
            headers.add(name: "Content-Length", value: contentLength)
        } else if !bodyless {
            if clientVersion.major > 1 || (clientVersion.major == 1 && clientVersion.minor >= 1) {
                headers.add(name: "Transfer-Encoding", value: "chunked")
            } else {
                closeAfter = true  // an HTTP/1.0 client reads to the end of the connection
            }
        }
        let status = HTTPResponseStatus(statusCode: code, reasonPhrase: response.status.reasonPhrase)
        return (HTTPResponseHead(version: clientVersion, status: status, headers: headers), closeAfter)
    }

    private static func forwarded(_ headers: HTTPHeaders, alsoDropping extra: Set<String>) -> HTTPFields {
        var connectionNamed: Set<String> = []
        for value in headers["connection"] {
            for token in value.split(separator: ",") {
                connectionNamed.insert(token.trimmingCharacters(in: " \t").lowercased())
            }
        }
        var fields = HTTPFields()
        for (name, value) in headers {
            let lowered = name.lowercased()
            if Self.hopByHop.contains(lowered) || connectionNamed.contains(lowered) || extra.contains(lowered) {
                continue
            }
            guard let fieldName = HTTPField.Name(name) else { continue }
            fields.append(HTTPField(name: fieldName, value: value))
        }
        return fields
    }
}

extension Substring {
    fileprivate func trimmingCharacters(in set: String) -> Substring {
        var result = self
        while let first = result.first, set.contains(first) { result = result.dropFirst() }
        while let last = result.last, set.contains(last) { result = result.dropLast() }
        return result
    }
}
