import AccessoryClient
import AccessoryHTTP1
import Foundation
import HTTPTypes
import NIOCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Everything the exchange needs from the `URLRequest` and the session, taken on the work
/// queue inside the first `startLoading` so that no Foundation object crosses to the exchange.
struct RequestPlan: Sendable {
    /// The request sent to the accessory.
    var request: AccessoryRequest
    /// The canonical URL, without user information: responses carry it (with the final path).
    var url: URL
    var delivery: SessionIntrospection.Delivery
    var cachePolicy: URLRequest.CachePolicy
    /// The request takes part in caching (a GET without a body) and the app set no validators.
    var cacheable: Bool
    /// `Cache-Control` of the request, for the storage policy.
    var requestCacheControl: String?
    /// The longest silence of the accessory: `request.timeoutInterval` if the app set it, else
    /// the configuration's `timeoutIntervalForRequest` (when the session can be read).
    var idleTimeout: Duration?
    /// The whole load (`timeoutIntervalForResource`).
    var resourceTimeout: Duration?
    var secure: Bool
    var maxBufferedBodySize: Int

    /// The private header that marks a request as already handled by the protocol. It is a
    /// header, not a `URLProtocol` property, because properties are lost when FoundationNetworking
    /// copies a request. It is never sent to the accessory.
    static let handledHeader = "X-Accessory-URLProtocol-Handled"
    /// `URLRequest`'s timeoutInterval when the app did not set one.
    static let defaultRequestTimeout: TimeInterval = 60
    /// The header that carries a 401's `WWW-Authenticate` to the app (see ``makeResponse``).
    static let challengeHeader = "X-Accessory-WWW-Authenticate"

    init(
        _ original: URLRequest,
        route: AccessoryRoute,
        configuration: URLSessionConfiguration?,
        delivery: SessionIntrospection.Delivery
    ) throws(AccessoryURLProtocolError) {
        let canonical = CanonicalRequest.make(original, additionalHeaders: configuration?.httpAdditionalHeaders)
        guard let url = canonical.url, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            throw AccessoryURLProtocolError(.invalidRequest, "the request has no valid URL")
        }
        var credentials: Credentials?
        if let user = components.percentEncodedUser {
            let info = user + (components.percentEncodedPassword.map { ":" + $0 } ?? "")
            guard let parsed = Credentials(userInfo: info) else {
                throw AccessoryURLProtocolError(.invalidRequest, "the user information of \(url) is not valid")
            }
            credentials = parsed
        }
        components.percentEncodedUser = nil
        components.percentEncodedPassword = nil
        var path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { path += "?" + query }

        let methodName = canonical.httpMethod ?? "GET"
        guard let method = HTTPRequest.Method(methodName) else {
            throw AccessoryURLProtocolError(.invalidRequest, "\(methodName) is not a valid HTTP method")
        }
        var fields = HTTPFields()
        var declaredLength: Int?
        for (name, value) in (canonical.allHTTPHeaderFields ?? [:]).sorted(by: { $0.key < $1.key }) {
            let lower = name.lowercased()
            if lower == Self.handledHeader.lowercased() || lower == "transfer-encoding" { continue }
            if lower == "content-length" {
                declaredLength = Int(value)
                continue
            }
            guard let fieldName = HTTPField.Name(name) else {
                throw AccessoryURLProtocolError(.invalidRequest, "\(name) is not a valid header field name")
            }
            fields.append(HTTPField(name: fieldName, value: value))
        }
        let body: HTTPRequestBody
        if let data = canonical.httpBody {
            body = .bytes(ByteBuffer(bytes: data))
        } else if let stream = canonical.httpBodyStream {
            body = BodyStreamSource(stream).body(length: declaredLength)
        } else {
            body = .none
        }

        // As FoundationNetworking's own HTTP protocol does: the request's timeoutInterval when the
        // app set it, else the configuration's timeoutIntervalForRequest. Whether the app set it
        // is an internal flag of URLRequest; a value other than the default 60 s stands for it
        // (an app that sets exactly 60 gets the configuration's value instead).
        var idle: TimeInterval? = canonical.timeoutInterval > 0 ? canonical.timeoutInterval : nil
        var resource: TimeInterval?
        if let configuration {
            if canonical.timeoutInterval == Self.defaultRequestTimeout, configuration.timeoutIntervalForRequest > 0 {
                idle = configuration.timeoutIntervalForRequest
            }
            if configuration.timeoutIntervalForResource > 0 { resource = configuration.timeoutIntervalForResource }
        }

        self.request = AccessoryRequest(
            method: method,
            path: path,
            headerFields: fields,
            body: body,
            credentials: credentials
        )
        self.url = components.url ?? url
        self.delivery = delivery
        self.cachePolicy = canonical.cachePolicy
        self.cacheable =
            ResponseCache.participates(canonical)
            && canonical.value(forHTTPHeaderField: "If-None-Match") == nil
            && canonical.value(forHTTPHeaderField: "If-Modified-Since") == nil
        self.requestCacheControl = canonical.value(forHTTPHeaderField: "Cache-Control")
        self.idleTimeout = idle.flatMap(Self.duration)
        self.resourceTimeout = resource.flatMap(Self.duration)
        self.secure = route.isSecure || url.scheme == AccessoryURLProtocol.secureScheme
        self.maxBufferedBodySize = route.maxBufferedBodySize
    }

    private static func duration(_ interval: TimeInterval) -> Duration? {
        guard interval.isFinite, interval > 0, interval < 1e9 else { return nil }
        return .milliseconds(Int64(interval * 1000))
    }

    /// The `HTTPURLResponse` handed to the session for `head`, received from `path`.
    ///
    /// A 401's `WWW-Authenticate` is renamed ``challengeHeader``: FoundationNetworking starts
    /// its own challenge flow for any 401 carrying it (which hangs, crashes, or re-sends the
    /// request over the network); the protocol has already answered the challenge itself.
    func makeResponse(_ head: HTTPResponse, path: String) -> HTTPURLResponse? {
        var components = URLComponents(url: self.url, resolvingAgainstBaseURL: false)
        let parts = path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        components?.percentEncodedPath = parts.first.map(String.init) ?? "/"
        components?.percentEncodedQuery = parts.count > 1 ? String(parts[1]) : nil
        let url = components?.url ?? self.url
        var fields: [String: String] = [:]
        for field in head.headerFields {
            var name = field.name.canonicalName
            if head.status.code == 401 && name == "www-authenticate" { name = Self.challengeHeader }
            if let existing = fields[name] {
                fields[name] = existing + ", " + field.value
            } else {
                fields[name] = field.value
            }
        }
        return HTTPURLResponse(url: url, statusCode: head.status.code, httpVersion: "HTTP/1.1", headerFields: fields)
    }
}
