import HTTPTypes

/// What the client does with a response, according to ``RedirectState``.
package enum RedirectDecision: Sendable, Hashable {
    /// Not a followed redirect (not a 3xx we follow, no `Location`, or redirects disabled):
    /// hand the response to the caller.
    case done
    /// Send `request` next.
    ///
    /// - `dropBody`: the new request must be sent without a body (the method became GET/HEAD).
    /// - `needsBodyReplay`: the new request keeps the original body (307/308, or 301/302 for
    ///   non-POST methods) and the original request had one, so the client must send it again;
    ///   if the body was a stream that cannot be replayed, the client should fail or return
    ///   the redirect response instead.
    case follow(HTTPRequest, dropBody: Bool, needsBodyReplay: Bool)
    /// A redirect that must not be followed; the client reports this as an error.
    case fail(RedirectFailure)
}
