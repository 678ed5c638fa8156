import HTTPTypes
import NIOHTTP1

/// The header rules of a gateway (RFC 9110 §7.6.1): fields that describe one connection are
/// not forwarded, in either direction; the link sets its own `Host` and framing.
enum ProxyHeaders {
    /// Fields that never cross the bridge, besides those a `Connection` field names.
    static let hopByHop: Set<String> = [
        "connection", "proxy-connection", "keep-alive", "te", "transfer-encoding", "upgrade",
        "proxy-authenticate", "proxy-authorization",
    ]

    /// The request fields to send on to the accessory: hop-by-hop fields, `Host` (the link sends
    /// the accessory's), `Expect` (the bridge answers `100-continue` itself) and `Content-Length`
    /// (the link frames the body) removed.
    static func requestFields(_ headers: HTTPHeaders) -> HTTPFields {
        Self.forwarded(headers, alsoDropping: ["host", "expect", "content-length"])
    }

    /// Fields that never travel in a trailer section: those that frame, route or authenticate a
    /// message, or control its handling (RFC 9110 §6.5.1), besides the hop-by-hop ones.
    static let notInTrailers: Set<String> = [
        "content-length", "content-encoding", "content-type", "content-range", "host", "authorization",
        "set-cookie", "cache-control", "expect", "max-forwards", "pragma", "range", "trailer",
    ]

    /// A client's trailer fields, as forwarded to the accessory.
    static func trailerFields(_ headers: HTTPHeaders) -> HTTPFields {
        Self.forwarded(headers, alsoDropping: Self.notInTrailers)
    }

    /// An accessory's trailer fields, as forwarded to the client.
    static func trailerHeaders(_ fields: HTTPFields) -> HTTPHeaders {
        var headers = HTTPHeaders()
        for field in fields {
            let name = field.name.canonicalName
            if Self.hopByHop.contains(name) || Self.notInTrailers.contains(name) { continue }
            headers.add(name: field.name.rawName, value: field.value)
        }
        return headers
    }

    /// The response fields to send on to the client, hop-by-hop fields removed, and how the
    /// body is framed: `closeAfter` for an HTTP/1.0 client reading to the end, `chunked` when it
    /// goes chunked (and can end with trailer fields). An answer that announces trailers
    /// (`Trailer`) goes chunked to an HTTP/1.1 client even when its length is known, so they
    /// are not lost.
    static func responseHead(
        _ response: HTTPResponse,
        forHEAD: Bool,
        clientVersion: HTTPVersion
    ) -> (head: HTTPResponseHead, closeAfter: Bool, chunked: Bool) {
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
        var chunked = false
        let clientChunks = clientVersion.major > 1 || (clientVersion.major == 1 && clientVersion.minor >= 1)
        let announcesTrailers = response.headerFields[.trailer] != nil
        if let contentLength, code != 204, !(100..<200).contains(code), forHEAD || !(announcesTrailers && clientChunks)
        {
            headers.add(name: "Content-Length", value: contentLength)
        } else if !bodyless {
            if clientChunks {
                headers.add(name: "Transfer-Encoding", value: "chunked")
                chunked = true
            } else {
                closeAfter = true  // an HTTP/1.0 client reads to the end of the connection
            }
        }
        let status = HTTPResponseStatus(statusCode: code, reasonPhrase: response.status.reasonPhrase)
        return (HTTPResponseHead(version: clientVersion, status: status, headers: headers), closeAfter, chunked)
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
