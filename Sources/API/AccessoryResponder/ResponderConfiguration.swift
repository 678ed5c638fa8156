/// Limits and defaults for an ``HTTPResponder``.
///
/// The limits exist because a link to an accessory is often a single, precious byte stream
/// (a USB bulk pair, a serial line): one client that sends an endless header must not be able
/// to wedge it, so oversized input is refused early and the link is closed.
public struct ResponderConfiguration: Sendable {
    /// The largest request head (request line plus all header fields) accepted, in bytes.
    ///
    /// A larger head is answered with `431 Request Header Fields Too Large` and the link is closed.
    /// It also bounds any single header field.
    public var maxHeaderBlockSize: Int = 64 * 1024

    /// The largest number of header fields (including trailers) accepted in one request.
    ///
    /// More fields are answered with `431 Request Header Fields Too Large` and the link is closed.
    public var maxHeaderCount: Int = 128

    /// The largest request body accepted, in bytes; `nil` (the default) accepts any size.
    ///
    /// A request whose `Content-Length` is larger is answered with `413 Content Too Large`
    /// before the handler runs; a body without a declared length that grows past it fails the
    /// handler's read with ``ResponderError/Code/bodyTooLarge`` and is answered with 413. Either
    /// way the link is closed after the answer (the rest of the body is never read).
    public var maxRequestBodySize: Int? = nil

    /// How long a link may stay idle between requests before the responder closes it.
    ///
    /// `nil` keeps idle links open for ever. The timer only runs while the responder waits for
    /// the next request head, never while a handler is working.
    public var idleTimeout: Duration? = nil

    /// The value of the `Server` header added to responses that do not set one; `nil` adds none.
    public var serverName: String? = "accessory-http"

    /// Whether the handler runs on the link's event loop thread (the default), or on Swift's
    /// global concurrent executor.
    ///
    /// On the event loop, reading a request, running the handler and writing the response stay
    /// on one thread: no thread wake-up per request, which roughly halves the latency of small
    /// requests. A handler that blocks (a synchronous sensor read, a `sleep`, a blocking file
    /// or device call) then stalls its link and every other link served by the same event
    /// loop; set this to `false` for such handlers, or move the blocking part off the loop
    /// (`withTaskExecutorPreference(globalConcurrentExecutor) { … }`).
    public var runsHandlersOnEventLoop = true

    /// Whether links served on a byte stream (a tty, stdio, a socketpair, a USB gadget, a unix
    /// socket without TLS) also speak the session layer (docs/framing.md §6): plain HTTP/1.1
    /// until a valid HELLO arrives, then sessions. Hosts that never send HELLO see no
    /// difference.
    public var acceptsSessions = true

    /// Receives one line per session frame sent (`>`) or received (`<`), for `serve -v`.
    public var sessionTracer: (@Sendable (String) -> Void)? = nil

    /// How long the exchanges under way may take to finish once a graceful shutdown began
    /// (``HTTPResponder/shutdown``): a link closes then, whatever is still open.
    public var shutdownGrace: Duration = .seconds(10)

    /// Creates the default configuration.
    public init() {}
}
