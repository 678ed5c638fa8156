import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The caching rules the protocol applies itself, because FoundationNetworking never stores a
/// custom protocol's responses: which requests take part, freshness from `Cache-Control:
/// max-age`, and the conditional headers for revalidation.
enum ResponseCache {
    /// Whether requests like `request` take part in caching at all (GET without a body).
    static func participates(_ request: URLRequest) -> Bool {
        (request.httpMethod ?? "GET").uppercased() == "GET" && request.httpBody == nil && request.httpBodyStream == nil
    }

    /// Whether `entry` may be used without asking the accessory (`max-age` not exceeded and
    /// no `no-cache`).
    static func isFresh(_ entry: AccessoryResponseCache.Entry, now: Date = Date()) -> Bool {
        let directives = (entry.response.value(forHTTPHeaderField: "Cache-Control") ?? "").lowercased()
            .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        if directives.contains("no-cache") { return false }
        guard
            let maxAge = directives.first(where: { $0.hasPrefix("max-age=") }).flatMap({ deltaSeconds($0.dropFirst(8)) }
            )
        else { return false }
        return now.timeIntervalSince(entry.storedAt) < maxAge
    }

    /// `delta-seconds` (RFC 9111 §1.2.2): digits only, and a value above 2^31 counts as 2^31.
    /// `Double(_:)` alone took `inf`, `1e300`, `-5` and `0x10` from a device, and `inf` kept an
    /// entry fresh for ever.
    static func deltaSeconds(_ text: Substring) -> Double? {
        guard !text.isEmpty, text.allSatisfy({ $0 >= "0" && $0 <= "9" }) else { return nil }
        return min(Double(text) ?? 2_147_483_648, 2_147_483_648)
    }

    /// `If-None-Match` / `If-Modified-Since` for revalidating `entry`, empty when it has no
    /// validator.
    static func validators(for entry: AccessoryResponseCache.Entry) -> [String: String] {
        var fields: [String: String] = [:]
        if let tag = entry.response.value(forHTTPHeaderField: "ETag") { fields["If-None-Match"] = tag }
        if let date = entry.response.value(forHTTPHeaderField: "Last-Modified") { fields["If-Modified-Since"] = date }
        return fields
    }
}
