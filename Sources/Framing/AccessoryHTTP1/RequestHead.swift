import HTTPTypes
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// How a request goes on the wire as an HTTP/1.1 head. Pure functions, no state.
enum RequestHead {

    /// The HTTP/1.1 head for `request` with `body`: the link's host when the request names none,
    /// framing headers that match the body, and header names title-cased if configured.
    static func make(
        _ request: HTTPRequest,
        body: HTTPRequestBody,
        configuration: LinkConfiguration
    ) throws(HTTPLinkError) -> HTTPRequestHead {
        var request = request
        if request.authority == nil { request.authority = configuration.host }
        request.headerFields[.transferEncoding] = nil
        if let length = body.knownLength {
            request.headerFields[.contentLength] = String(length)
        } else if !body.isNone {
            request.headerFields[.contentLength] = nil
            request.headerFields[.transferEncoding] = "chunked"
        } else if request.method == .post || request.method == .put || request.method == .patch {
            request.headerFields[.contentLength] = "0"
        } else {
            request.headerFields[.contentLength] = nil
        }
        var head: HTTPRequestHead
        do {
            head = try HTTPRequestHead(request)
        } catch {
            throw HTTPLinkError(
                .invalidRequest,
                "the request cannot be written as HTTP/1.1: \(error)",
                underlying: error
            )
        }
        if configuration.titleCaseHeaderNames {
            head.headers = HTTPHeaders(head.headers.map { (titleCased($0.name), $0.value) })
        }
        return head
    }

    /// `content-type` → `Content-Type`: each `-`-separated word capitalised, the rest lowercase.
    static func titleCased(_ name: String) -> String {
        name.split(separator: "-", omittingEmptySubsequences: false)
            .map { word in word.prefix(1).uppercased() + word.dropFirst().lowercased() }
            .joined(separator: "-")
    }
}
