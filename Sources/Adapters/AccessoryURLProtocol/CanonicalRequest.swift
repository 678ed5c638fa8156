import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The canonical form of a request, applied by the protocol itself because FoundationNetworking
/// never calls `canonicalRequest(for:)` and does not apply `httpAdditionalHeaders` to requests
/// served by a custom protocol.
enum CanonicalRequest {
    /// Lowercase scheme and host, an empty path made `/`, the session's additional headers
    /// (where the request does not set the field) and `Accept: */*` when none is set.
    static func make(_ request: URLRequest, additionalHeaders: [AnyHashable: Any]? = nil) -> URLRequest {
        var result = request
        if let url = request.url, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) {
            components.scheme = components.scheme?.lowercased()
            if let host = components.percentEncodedHost { components.percentEncodedHost = host.lowercased() }
            if components.percentEncodedPath.isEmpty { components.percentEncodedPath = "/" }
            result.url = components.url ?? url
        }
        for (key, value) in additionalHeaders ?? [:] {
            guard let name = key as? String, result.value(forHTTPHeaderField: name) == nil else { continue }
            result.setValue("\(value)", forHTTPHeaderField: name)
        }
        if result.value(forHTTPHeaderField: "Accept") == nil {
            result.setValue("*/*", forHTTPHeaderField: "Accept")
        }
        return result
    }
}
