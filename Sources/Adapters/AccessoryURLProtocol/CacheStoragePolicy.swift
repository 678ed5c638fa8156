import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// When a response may be cached, following Apple's `CacheStoragePolicyForRequestAndResponse`
/// (CustomHTTPProtocol sample): only statuses 200, 203, 206, 301, 304, 404 and 410; never when
/// the request or the response says `Cache-Control: no-store`; in memory only when the
/// transfer was secure.
public enum CacheStoragePolicy {
    /// The storage policy for `response` to `request`.
    ///
    /// - Parameters:
    ///   - request: the request the response answers; its `Cache-Control` is checked.
    ///   - response: the response to store; its status and `Cache-Control` are checked.
    ///   - secure: whether the exchange ran over TLS (`accessorys://` or `https://`).
    public static func policy(
        for request: URLRequest,
        response: HTTPURLResponse,
        secure: Bool
    ) -> URLCache.StoragePolicy {
        let cacheableStatuses: Set<Int> = [200, 203, 206, 301, 304, 404, 410]
        guard cacheableStatuses.contains(response.statusCode) else { return .notAllowed }
        if Self.hasNoStore(response.value(forHTTPHeaderField: "Cache-Control")) { return .notAllowed }
        if Self.hasNoStore(request.value(forHTTPHeaderField: "Cache-Control")) { return .notAllowed }
        return secure ? .allowedInMemoryOnly : .allowed
    }

    private static func hasNoStore(_ cacheControl: String?) -> Bool {
        guard let cacheControl else { return false }
        return cacheControl.lowercased().split(separator: ",").contains {
            $0.trimmingCharacters(in: .whitespaces) == "no-store"
        }
    }
}
