/// Answers one request. The responder calls it once per request, in order, one at a time per link.
///
/// Throwing before the response is returned yields `500 Internal Server Error`; throwing from a
/// streamed body after the head was sent closes the link, because the response cannot be
/// completed honestly.
///
/// By default the handler runs on the link's event loop thread and must not block; see
/// ``ResponderConfiguration/runsHandlersOnEventLoop``.
///
/// Its task is cancelled when the host no longer wants the answer: it reset the HTTP/2 stream,
/// started a new session, or hung up the link.
public typealias HTTPHandler = @Sendable (ResponderRequest) async throws -> ResponderResponse
