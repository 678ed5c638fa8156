/// The scheme, host and port that identify one accessory, used to decide whether a redirect
/// stays on the same accessory and whether credentials may travel with it.
package struct AccessoryOrigin: Sendable, Hashable {
    /// Lowercased scheme; `nil` when the request carried none (the link's default).
    package var scheme: String?
    /// Lowercased host, without brackets for IPv6 literals and without user information.
    package var host: String
    /// The explicit port, if the authority named one.
    package var port: Int?

    package init(scheme: String?, authority: String?) {
        self.scheme = scheme?.lowercased()
        var rest = Substring(authority ?? "")
        // User information never identifies the peer.
        if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        var port: Int?
        if rest.hasPrefix("["), let close = rest.firstIndex(of: "]") {
            let afterClose = rest[rest.index(after: close)...]
            if afterClose.hasPrefix(":") { port = Int(afterClose.dropFirst()) }
            rest = rest[rest.index(after: rest.startIndex)..<close]
        } else if let colon = rest.lastIndex(of: ":"), let number = Int(rest[rest.index(after: colon)...]) {
            port = number
            rest = rest[..<colon]
        }
        self.host = rest.lowercased()
        self.port = port
    }

    /// Whether both name the same accessory. A missing scheme stands for the link's own
    /// plaintext scheme, so it matches `http` and `accessory` but never `https`.
    package func isSameAccessory(as other: AccessoryOrigin) -> Bool {
        guard self.host == other.host else { return false }
        let scheme: String?
        switch (self.scheme, other.scheme) {
        case (let left?, let right?):
            guard left == right else { return false }
            scheme = left
        case (nil, nil):
            scheme = nil
        case (nil, let known?), (let known?, nil):
            guard known == "http" || known == "accessory" else { return false }
            scheme = known
        }
        let defaultPort = Self.defaultPort(for: scheme)
        return (self.port ?? defaultPort) == (other.port ?? defaultPort)
    }

    private static func defaultPort(for scheme: String?) -> Int? {
        switch scheme {
        case "http": return 80
        case "https": return 443
        default: return nil
        }
    }
}
