import HTTPTypes

/// When a request may be sent a second time: it went out on a reused link that failed before
/// a byte of its response arrived (the device closed the link while it was idle, as the
/// request went out), and sending it again cannot do anything twice. async-http-client and
/// browsers retry such a request once on a fresh connection; so does ``HTTPLink``, and
/// `HTTP2Link` when a stream's session ended before its response head.
package enum ResendPolicy {
    /// An idempotent method (RFC 9110 §9.2.2) with a body that can be sent again as it is (no
    /// body, or bytes; a stream's producer is the caller's code and is not run twice here).
    package static func mayResend(_ request: HTTPRequest, _ body: HTTPRequestBody) -> Bool {
        if case .stream = body.storage { return false }
        return [.get, .head, .options, .trace, .put, .delete].contains(request.method)
    }
}

/// Thrown by one attempt of ``HTTPLink``'s exchange when ``ResendPolicy`` allows a second.
struct RetryOnAFreshLink: Error {
    /// What the first attempt failed with, for the caller if the second fails to start.
    let error: any Error
}
