import NIOCore

/// Receives a trace of what crosses a link, in order: the packet trace that serial and USB
/// links otherwise lack. Calls arrive on the link's event loop; keep them quick.
public struct LinkTracer: Sendable {
    /// One thing that crossed the link, or happened to it.
    public enum Event: Sendable {
        /// A request head as written: start line and header lines, without the final blank line.
        case requestHead(String)
        /// Request body bytes as handed to the framing encoder.
        case requestBody(ByteBuffer)
        /// A response head as parsed (informational ones too).
        case responseHead(String)
        /// Response body bytes after de-chunking.
        case responseBody(ByteBuffer)
        /// Something that happened to the link: opened, drained, torn down…
        case note(String)
    }

    private let sink: @Sendable (Event) -> Void

    /// A tracer that hands every event to `sink`.
    ///
    /// - Parameter sink: called with each event, in order, on the link's event loop; keep it quick.
    public init(_ sink: @escaping @Sendable (Event) -> Void) { self.sink = sink }

    package func emit(_ event: Event) { self.sink(event) }
}
