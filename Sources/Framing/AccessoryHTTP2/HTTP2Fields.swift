import AccessoryHTTP1
import HTTPTypes
import NIOHPACK

/// swift-http-types heads to HPACK header blocks and back, for frame-level streams (the link's
/// client streams, the responder's server streams): what NIOHTTPTypesHTTP2's codec does
/// in a stream channel, whose conversions are not public. `NIOHTTP2Handler` has already
/// validated a received block (its header block validation: pseudo-header fields first, none
/// unknown, names lowercase, the request's required ones present).
public enum HTTP2Fields {
    /// The request head as a header block: the pseudo-header fields, then the fields.
    static func block(_ request: HTTPRequest) -> HPACKHeaders {
        var headers = HPACKHeaders()
        headers.reserveCapacity(request.headerFields.count + 4)
        headers.add(request.pseudoHeaderFields.method)
        if let field = request.pseudoHeaderFields.scheme { headers.add(field) }
        if let field = request.pseudoHeaderFields.authority { headers.add(field) }
        if let field = request.pseudoHeaderFields.path { headers.add(field) }
        if let field = request.pseudoHeaderFields.extendedConnectProtocol { headers.add(field) }
        for field in request.headerFields { headers.add(field) }
        return headers
    }

    /// A response head as a header block: `:status`, then the fields.
    public static func block(_ response: HTTPResponse) -> HPACKHeaders {
        var headers = HPACKHeaders()
        headers.reserveCapacity(response.headerFields.count + 1)
        headers.add(response.pseudoHeaderFields.status)
        for field in response.headerFields { headers.add(field) }
        return headers
    }

    /// Trailer fields as a header block.
    public static func block(_ trailers: HTTPFields) -> HPACKHeaders {
        var headers = HPACKHeaders()
        headers.reserveCapacity(trailers.count)
        for field in trailers { headers.add(field) }
        return headers
    }

    /// A response head from a received header block.
    ///
    /// - Throws: `HTTPLinkError` `malformed-response` for a block without one `:status` of three
    ///   digits, or with another pseudo-header field.
    static func response(_ block: HPACKHeaders) throws -> HTTPResponse {
        var status: Int?
        var fields = HTTPFields()
        fields.reserveCapacity(block.count)
        for (name, value, indexing) in block {
            if name.utf8.first == UInt8(ascii: ":") {
                guard name == ":status", status == nil, fields.isEmpty else {
                    throw Self.malformed("a response head with the pseudo-header field \(name) out of place")
                }
                guard value.utf8.count == 3, let code = Int(value) else {
                    throw Self.malformed("a response head with :status \(value), not three digits")
                }
                status = code
            } else if let fieldName = HTTPField.Name(name) {
                fields.append(HTTPField(name: fieldName, value: value, indexing: indexing))
            }
        }
        guard let status else { throw Self.malformed("a response head without :status") }
        var response = HTTPResponse(status: HTTPResponse.Status(code: status))
        response.headerFields = fields
        return response
    }

    /// A request head from a received header block, with NIOHTTPTypesHTTP2's rules: the
    /// pseudo-header fields first, each at most once, `:method` present and a valid token.
    ///
    /// - Parameters:
    ///   - block: the header block NIOHTTP2Handler decoded.
    ///   - malformed: makes the caller's error from what was wrong (for example "a request head
    ///     without :method").
    public static func request(_ block: HPACKHeaders, malformed: (String) -> any Error) throws -> HTTPRequest {
        var method: String?
        var scheme: String?
        var authority: String?
        var path: String?
        var extendedProtocol: String?
        var index = block.startIndex
        while index != block.endIndex {
            let (name, value, _) = block[index]
            guard name.utf8.first == UInt8(ascii: ":") else { break }
            switch name {
            case ":method": method = try Self.once(method, value, name, malformed)
            case ":scheme": scheme = try Self.once(scheme, value, name, malformed)
            case ":authority": authority = try Self.once(authority, value, name, malformed)
            case ":path": path = try Self.once(path, value, name, malformed)
            case ":protocol": extendedProtocol = try Self.once(extendedProtocol, value, name, malformed)
            default: throw malformed("a request head with the unknown pseudo-header field \(name)")
            }
            index = block.index(after: index)
        }
        guard let method else { throw malformed("a request head without :method") }
        guard let requestMethod = HTTPRequest.Method(method) else {
            throw malformed("a request head whose :method is not a token")
        }
        var request = HTTPRequest(method: requestMethod, scheme: scheme, authority: authority, path: path)
        if let extendedProtocol { request.extendedConnectProtocol = extendedProtocol }
        request.headerFields.reserveCapacity(block.count)
        while index != block.endIndex {
            let (name, value, indexing) = block[index]
            guard name.utf8.first != UInt8(ascii: ":") else {
                throw malformed("a request head with the pseudo-header field \(name) after a field")
            }
            if let fieldName = HTTPField.Name(name) {
                request.headerFields.append(HTTPField(name: fieldName, value: value, indexing: indexing))
            }
            index = block.index(after: index)
        }
        return request
    }

    private static func once(
        _ current: String?,
        _ value: String,
        _ name: String,
        _ malformed: (String) -> any Error
    ) throws -> String {
        guard current == nil else { throw malformed("a request head with \(name) twice") }
        return value
    }

    /// Trailer fields from a received header block.
    ///
    /// - Throws: `HTTPLinkError` `malformed-response` when the block holds a pseudo-header field.
    static func trailers(_ block: HPACKHeaders) throws -> HTTPFields {
        try Self.trailers(block) { Self.malformed($0) }
    }

    /// Trailer fields from a received header block; `malformed` makes the error for a block
    /// that holds a pseudo-header field.
    public static func trailers(_ block: HPACKHeaders, malformed: (String) -> any Error) throws -> HTTPFields {
        var fields = HTTPFields()
        fields.reserveCapacity(block.count)
        for (name, value, indexing) in block {
            guard name.utf8.first != UInt8(ascii: ":") else {
                throw malformed("trailer fields with the pseudo-header field \(name)")
            }
            if let fieldName = HTTPField.Name(name) {
                fields.append(HTTPField(name: fieldName, value: value, indexing: indexing))
            }
        }
        return fields
    }

    /// Whether a received header block is an informational (1xx) response head.
    static func isInformational(_ block: HPACKHeaders) -> Bool {
        block.first(name: ":status")?.utf8.first == UInt8(ascii: "1")
    }

    private static func malformed(_ what: String) -> HTTPLinkError {
        HTTPLinkError(.malformedResponse, "the device sent \(what) on an HTTP/2 stream")
    }
}

extension HPACKHeaders {
    fileprivate mutating func add(_ field: HTTPField) {
        let indexing: HPACKIndexing
        switch field.indexingStrategy {
        case .avoid: indexing = .nonIndexable
        case .disallow: indexing = .neverIndexed
        default: indexing = .indexable
        }
        self.add(name: field.name.canonicalName, value: field.value, indexing: indexing)
    }
}

extension HTTPField {
    fileprivate init(name: HTTPField.Name, value: String, indexing: HPACKIndexing) {
        self.init(name: name, value: value)
        switch indexing {
        case .indexable: break
        case .nonIndexable: self.indexingStrategy = .avoid
        case .neverIndexed: self.indexingStrategy = .disallow
        }
    }
}
