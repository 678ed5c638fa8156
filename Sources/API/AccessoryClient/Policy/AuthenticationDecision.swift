import HTTPTypes

/// What the client does with a response, according to ``AuthenticationState``.
package enum AuthenticationDecision: Sendable, Hashable {
    /// Not a 401: hand the response on (to redirect handling or the caller).
    case done
    /// Send this request (the original with a new `Authorization` field) again, with the
    /// original body.
    case retry(HTTPRequest)
    /// Stop retrying and return the 401 to the caller; the reason is for logs and errors.
    case giveUp(AuthenticationFailure)
}
