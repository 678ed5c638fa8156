import AccessoryHTTP1
import HTTPTypes
import NIOCore

/// A request to an accessory.
public struct AccessoryRequest: Sendable {
    /// The request method (`GET`, `POST`…).
    public var method: HTTPRequest.Method
    /// The request target: a path with an optional query (`/status?verbose=1`).
    public var path: String
    /// The request's header fields. The client adds those of its
    /// ``AccessoryClient/Configuration/defaultHeaderFields`` that are not set here.
    public var headerFields: HTTPFields
    /// The body. A streamed body's producer may be called again when a 307/308 redirect or an
    /// authentication retry re-sends the request; it must then produce the same bytes.
    public var body: HTTPRequestBody
    /// Credentials for Basic or Digest authentication, used when the device asks (401).
    public var credentials: Credentials?
    /// The whole exchange, redirects and authentication retries included, must end within this.
    public var timeout: Duration?

    /// A request for `path`.
    ///
    /// - Parameters:
    ///   - method: the request method; `GET` by default.
    ///   - path: the request target: a path with an optional query (`/status?verbose=1`).
    ///   - headerFields: the request's header fields; none by default.
    ///   - body: the request body; none by default.
    ///   - credentials: credentials for Basic or Digest authentication, used when the device asks;
    ///     `nil` by default.
    ///   - timeout: the bound on the whole exchange; `nil` (the default) uses the client's
    ///     ``AccessoryClient/Configuration/defaultTimeout``.
    public init(
        method: HTTPRequest.Method = .get,
        path: String,
        headerFields: HTTPFields = [:],
        body: HTTPRequestBody = .none,
        credentials: Credentials? = nil,
        timeout: Duration? = nil
    ) {
        self.method = method
        self.path = path
        self.headerFields = headerFields
        self.body = body
        self.credentials = credentials
        self.timeout = timeout
    }

    /// Parses `accessory://[user[:password]@]NAME/path?query`, `http://…`, or a bare `/path`.
    /// Credentials in the URL are percent-decoded and used for authentication.
    public init(method: HTTPRequest.Method = .get, url: String) throws(AccessoryClientError) {
        self.init(method: method, path: "/")
        var rest = Substring(url)
        if let schemeEnd = rest.range(of: "://") {
            rest = rest[schemeEnd.upperBound...]
            let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
            let authority = rest[..<authorityEnd]
            if let at = authority.lastIndex(of: "@") {
                guard let credentials = Credentials(userInfo: String(authority[..<at])) else {
                    throw AccessoryClientError(.invalidRequest, "the user information in \(url) is not valid")
                }
                self.credentials = credentials
            }
            rest = rest[authorityEnd...]
        }
        if rest.isEmpty { rest = "/" }
        if rest.first == "?" { rest = "/" + rest }
        guard rest.first == "/" else {
            throw AccessoryClientError(.invalidRequest, "\(url) is not a path (it must start with /) nor a URL")
        }
        if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
        self.path = String(rest)
    }
}
