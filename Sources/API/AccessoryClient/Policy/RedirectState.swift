import Foundation
import HTTPTypes

/// The I/O-free redirect state machine for one logical request (modelled on
/// async-http-client's `RedirectState`).
///
/// Create one per caller request, then feed it every response with ``next(request:response:hadBody:)``;
/// it counts hops, detects cycles, rewrites the method and body as RFC 9110 §15.4 prescribes,
/// and refuses to leave the original accessory unless the policy allows it.
package struct RedirectState: Sendable {
    /// Status codes that are followed. 300 (a choice for the user), 304 (a cache answer),
    /// 305 and 306 (deprecated/unused) are not.
    private static let followedStatuses: Set<Int> = [301, 302, 303, 307, 308]
    /// URL schemes a `Location` may use; anything else is not something this client can reach.
    private static let supportedSchemes: Set<String> = ["http", "https", "accessory"]

    package let policy: RedirectPolicy
    /// How many redirects have been followed so far.
    package private(set) var redirectCount = 0
    private let initialRequest: HTTPRequest
    /// Method and URL of every request sent in this chain. The method is part of the key so a
    /// POST answered by "303 See Other" pointing at its own URL (a common form pattern) is not
    /// mistaken for a cycle. Filled on the first redirect: most requests are never redirected,
    /// and building keys for them cost measurable time per small request.
    private var visited: Set<String> = []

    package init(policy: RedirectPolicy, initialRequest: HTTPRequest) {
        self.policy = policy
        self.initialRequest = initialRequest
    }

    /// Decides what to do with `response`, which answered `request`.
    /// - Parameters:
    ///   - request: The request that produced the response (the latest hop).
    ///   - response: Its response head.
    ///   - hadBody: Whether `request` carried a body.
    package mutating func next(request: HTTPRequest, response: HTTPResponse, hadBody: Bool) -> RedirectDecision {
        guard Self.followedStatuses.contains(response.status.code), self.policy.followsRedirects else {
            return .done
        }
        guard let location = response.headerFields[.location]?.trimmingCharacters(in: .whitespaces),
            !location.isEmpty
        else { return .done }
        guard let target = Self.resolve(location: location, against: request) else {
            return .fail(.invalidLocation(location))
        }

        if self.visited.isEmpty { self.visited.insert(Self.visitKey(self.initialRequest)) }
        let originalOrigin = AccessoryOrigin(
            scheme: self.initialRequest.scheme,
            authority: self.initialRequest.authority
        )
        let targetOrigin = AccessoryOrigin(scheme: target.scheme, authority: target.authority)
        let staysOnOriginal = targetOrigin.isSameAccessory(as: originalOrigin)
        if !staysOnOriginal && !self.policy.allowCrossAccessory {
            return .fail(.crossAccessoryRefused(location: location))
        }
        guard self.redirectCount < self.policy.maxRedirects else {
            return .fail(.tooManyRedirects(limit: self.policy.maxRedirects))
        }

        var next = request
        let currentOrigin = AccessoryOrigin(scheme: request.scheme, authority: request.authority)
        let staysOnCurrent = targetOrigin.isSameAccessory(as: currentOrigin)
        if !staysOnCurrent {
            next.scheme = target.scheme
            next.authority = target.authority
        }
        next.path = target.pathAndQuery

        // RFC 9110 §15.4: 303 always becomes GET (HEAD stays HEAD); 301/302 turn POST into
        // GET as every browser does; 307/308 keep the method and body.
        let dropBody: Bool
        switch response.status.code {
        case 303:
            if request.method != .head { next.method = .get }
            dropBody = true
        case 301, 302:
            if request.method == .post { next.method = .get }
            dropBody = request.method == .post
        default:
            dropBody = false
        }
        if dropBody {
            next.headerFields[.contentLength] = nil
            next.headerFields[.contentType] = nil
            next.headerFields[.transferEncoding] = nil
        }
        if !staysOnCurrent || !staysOnOriginal {
            // Credentials were meant for the accessory the caller addressed, not this one.
            next.headerFields[.authorization] = nil
            next.headerFields[.cookie] = nil
        }

        let key = Self.visitKey(next)
        guard !self.visited.contains(key) else {
            return .fail(.cycle(url: Self.displayURL(next)))
        }
        self.visited.insert(key)
        self.redirectCount += 1
        return .follow(next, dropBody: dropBody, needsBodyReplay: hadBody && !dropBody)
    }

    /// A resolved redirect target.
    private struct Target {
        var scheme: String
        var authority: String?
        var pathAndQuery: String
    }

    /// Resolves `location` against the request's URL (RFC 3986 §5) and splits the result,
    /// dropping any fragment and user information.
    private static func resolve(location: String, against request: HTTPRequest) -> Target? {
        let basePath = request.path.flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/"
        let baseString = "\(request.scheme ?? "http")://\(request.authority ?? "")\(basePath)"
        guard let base = URL(string: baseString),
            let resolved = URL(string: location, relativeTo: base)?.absoluteURL.standardized
        else { return nil }
        let absolute = resolved.absoluteString

        guard let colon = absolute.firstIndex(of: ":") else { return nil }
        let scheme = absolute[..<colon].lowercased()
        guard Self.supportedSchemes.contains(scheme) else { return nil }
        let afterScheme = absolute[absolute.index(after: colon)...]
        guard afterScheme.hasPrefix("//") else { return nil }
        let authorityAndRest = afterScheme.dropFirst(2)
        let authorityEnd =
            authorityAndRest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? authorityAndRest.endIndex
        var authority = authorityAndRest[..<authorityEnd]
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        var rest = authorityAndRest[authorityEnd...]
        if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
        var pathAndQuery = String(rest)
        if !pathAndQuery.hasPrefix("/") { pathAndQuery = "/" + pathAndQuery }
        guard !pathAndQuery.contains(where: { $0 == " " || $0 == "\r" || $0 == "\n" }) else { return nil }

        return Target(
            scheme: scheme,
            authority: authority.isEmpty ? nil : String(authority),
            pathAndQuery: pathAndQuery
        )
    }

    private static func visitKey(_ request: HTTPRequest) -> String {
        // Scheme and authority are case-insensitive; the path is not.
        let origin = "\(request.scheme ?? "http")://\(request.authority ?? "")".lowercased()
        return "\(request.method.rawValue) \(origin)\(request.path ?? "/")"
    }

    private static func displayURL(_ request: HTTPRequest) -> String {
        "\(request.scheme ?? "http")://\(request.authority ?? "")\(request.path ?? "/")"
    }
}
