import AccessoryHTTP1
import HTTPTypes
import NIOHPACK

/// swift-http-types heads to HPACK header blocks and back, for the frame-level client streams
/// (``HTTP2ClientStreams``): what NIOHTTPTypesHTTP2's codec does in a stream channel, whose
/// conversions are not public. `NIOHTTP2Handler` has already validated a received block (its
/// header block validation: pseudo-header fields first, none unknown, names lowercase).
enum HTTP2Fields {
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

    /// Trailer fields as a header block.
    static func block(_ trailers: HTTPFields) -> HPACKHeaders {
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

    /// Trailer fields from a received header block.
    ///
    /// - Throws: `HTTPLinkError` `malformed-response` when the block holds a pseudo-header field.
    static func trailers(_ block: HPACKHeaders) throws -> HTTPFields {
        var fields = HTTPFields()
        fields.reserveCapacity(block.count)
        for (name, value, indexing) in block {
            guard name.utf8.first != UInt8(ascii: ":") else {
                throw Self.malformed("trailer fields with the pseudo-header field \(name)")
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
