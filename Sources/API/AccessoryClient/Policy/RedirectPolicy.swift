/// How the client follows HTTP redirects (3xx responses carrying a `Location`).
///
/// By default up to ten redirects are followed, and only to the same accessory: a relative
/// `Location`, or an absolute one with the same scheme, host and port as the original request.
/// A redirect that would leave the accessory fails instead of silently talking to another peer.
public struct RedirectPolicy: Sendable, Hashable {
    /// The most redirects followed for one request. Zero or less means redirects are not
    /// followed at all and the 3xx response is returned to the caller.
    public var maxRedirects: Int

    /// Whether a redirect may lead to a different scheme, host or port than the original
    /// request. When allowed, `Authorization` and `Cookie` are removed on such a hop.
    public var allowCrossAccessory: Bool

    /// Creates a redirect policy.
    /// - Parameters:
    ///   - maxRedirects: The most redirects followed for one request (default 10).
    ///   - allowCrossAccessory: Whether redirects may leave the original accessory (default `false`).
    public init(maxRedirects: Int = 10, allowCrossAccessory: Bool = false) {
        self.maxRedirects = maxRedirects
        self.allowCrossAccessory = allowCrossAccessory
    }

    /// Follows up to ten redirects within the same accessory.
    public static let `default` = RedirectPolicy()

    /// Never follows redirects: 3xx responses are returned to the caller as they are.
    public static let none = RedirectPolicy(maxRedirects: 0)

    /// Whether any redirect is followed.
    public var followsRedirects: Bool { self.maxRedirects > 0 }
}
