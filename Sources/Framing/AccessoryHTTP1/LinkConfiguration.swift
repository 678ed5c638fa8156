import AccessoryTransport

/// Parsing limits for responses read from a device.
///
/// A device is untrusted input: without limits, a stuck or hostile device could make the host
/// buffer without bound while it waits for the end of a start line or header block.
public struct HTTPLimits: Sendable, Hashable {
    /// Longest status line accepted, in bytes (including the line ending).
    public var maxStartLineLength: Int = 8 * 1024
    /// Largest header block accepted (all field names and values), in bytes.
    public var maxHeaderBlockSize: Int = 64 * 1024
    /// Most header fields accepted in one response.
    public var maxHeaderCount: Int = 100

    /// The default limits: an 8 KiB status line, a 64 KiB header block, 100 header fields.
    public init() {}
}

/// How a link to one accessory behaves.
public struct LinkConfiguration: Sendable {
    /// The `Host` header sent when a request carries no authority. Accessories have no DNS
    /// name; the default names the accessory generically.
    public var host: String = "accessory"
    /// Limits for parsing responses.
    public var limits = HTTPLimits()
    /// How long opening the byte stream pair may take.
    public var openTimeout: Duration = .seconds(10)
    /// How long the device may stay silent while a response (or more of its body) is due. On an
    /// HTTP/2 link it bounds each stream's silence while its exchange waits; the stream is reset.
    public var idleTimeout: Duration = .seconds(30)
    /// How many body bytes of an abandoned response are read and discarded to keep the link
    /// in step. Past this bound the link is torn down and reopened instead.
    public var drainLimit: Int = 4 * 1024 * 1024
    /// How long draining an abandoned response may take before the link is torn down.
    public var drainTimeout: Duration = .seconds(5)
    /// After reopening a transport that may still carry stale bytes (a serial line), input is
    /// discarded until the line has been quiet this long…
    public var settleQuietPeriod: Duration = .milliseconds(100)
    /// …but for no longer than this in total.
    public var settleMaxDuration: Duration = .seconds(3)
    /// How long to wait for `100 Continue` before sending a request body anyway (curl waits 1 s).
    public var expectContinueTimeout: Duration = .seconds(1)
    /// How many response body bytes may wait for a slow consumer before reading from the
    /// device pauses (back-pressure). Memory per link stays near this bound.
    public var responseBufferSize: Int = 1024 * 1024
    /// Ask for a compressed body (`Accept-Encoding: deflate, gzip`, unless the request names its
    /// own) and decode a `gzip` or `deflate` body before the caller sees it, as URLSession and
    /// `curl --compressed` do. The head keeps the device's `Content-Encoding` and
    /// `Content-Length` (of the compressed bytes). A body that inflates more than
    /// ``maxDecompressionRatio`` times is refused (a decompression bomb). Off by default: the
    /// caller gets the bytes as the device sent them.
    public var decompressResponses = false
    /// How many times larger than its compressed form a decoded body may grow. Real text can
    /// reach a few hundred (a repeated line: 300×); deflate's own maximum is about 1030×, which
    /// only a crafted body (all zeros) comes near.
    public var maxDecompressionRatio = 1000
    /// Receives a trace of both directions, if set (the CLI's `-v`).
    public var tracer: LinkTracer?
    /// The HTTP version the link speaks (`http=` in a device spec): HTTP/1.1, or HTTP/2 with
    /// prior knowledge (AccessoryClient then runs its requests as concurrent HTTP/2 streams).
    public var httpVersion: LinkOptions.HTTPVersion = .http1_1
    /// Write request header names in Title-Case (`Content-Type`, `X-Api-Key`), for devices that
    /// accept nothing else (the USB `title-case-headers` quirk). Off: names go out as given.
    public var titleCaseHeaderNames = false

    /// The defaults: `Host: accessory`, a 10 s open and a 30 s idle timeout, a 4 MiB and 5 s drain
    /// bound, a 1 MiB response buffer, HTTP/1.1, no decompression, no tracer.
    public init() {}
}
