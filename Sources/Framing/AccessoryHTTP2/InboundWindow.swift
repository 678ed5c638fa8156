/// One receive window (a stream's or the connection's) and when to top it up: the rule of
/// swift-nio-http2's internal `InboundWindowManager`, which its stream channels apply. A
/// WINDOW_UPDATE goes out when the window, counting the bytes received but not yet taken by the
/// exchange as still open, has fallen to half its target or below; it tops the window up to the
/// target. So the device is held back by what the exchange has not read, never by more.
public struct InboundWindow {
    private var target: Int
    /// The window as NIOHTTP2Handler last reported it.
    private var lastSize: Int?
    /// Bytes received and not yet taken by the exchange.
    private var heldBytes = 0
    /// No more WINDOW_UPDATEs: the device has ended its side, or the stream is gone.
    public var closed = false

    /// A window kept topped up to `target` bytes. A stream's target is the initial window in
    /// force when it opened (``InitialStreamWindow``), which moves it later.
    public init(target: Int) {
        self.target = target
    }

    /// NIOHTTP2Handler reported the window's size; returns the increment to send, if any.
    public mutating func newWindowSize(_ size: Int) -> Int? {
        self.lastSize = size
        return self.increment(windowSize: size + self.heldBytes)
    }

    /// Our SETTINGS_INITIAL_WINDOW_SIZE took effect, changing every stream's window, and its
    /// target, by `delta`.
    public mutating func initialWindowSizeChanged(delta: Int) -> Int? {
        self.target += delta
        guard let lastSize = self.lastSize else { return nil }
        return self.newWindowSize(lastSize + delta)
    }

    /// DATA arrived that the exchange has not taken yet.
    public mutating func frameReceived(size: Int) {
        self.heldBytes += size
    }

    /// The exchange took `size` bytes; returns the increment to send, if any.
    public mutating func frameEmitted(size: Int) -> Int? {
        self.heldBytes -= min(size, self.heldBytes)
        guard let lastSize = self.lastSize else { return nil }
        return self.increment(windowSize: lastSize + self.heldBytes)
    }

    private func increment(windowSize: Int) -> Int? {
        guard !self.closed, windowSize < self.target else { return nil }
        if windowSize >= 0 {
            let increment = self.target - windowSize
            return increment >= windowSize ? increment : nil
        }
        // A window below zero (the peer's settings shrank it): up to the target, within 2^31 - 1.
        return min(-windowSize + self.target, Int(Int32.max))
    }
}

/// The receive window a new stream starts with on one connection: HTTP/2's 65 535 until the peer
/// acknowledges our SETTINGS_INITIAL_WINDOW_SIZE (`NIOHTTP2BulkStreamWindowChangeEvent`), the
/// setting after. A stream's ``InboundWindow`` starts from it, not from the setting: a stream
/// opened before the acknowledgement (a connection's first request) would otherwise be topped up
/// to the setting at once and then raised by the change again. swift-nio-http2's stream channels
/// do that (they start every stream at the configured target): the responder's first request
/// stream of a connection took 448 KiB of an upload ahead of a handler that had not read it, not
/// the 256 KiB it announced (`ResponderBackPressureTests`, about one run in three).
public struct InitialStreamWindow: Sendable {
    /// The initial window now.
    public private(set) var size = 65_535

    /// HTTP/2's default, until a change is acknowledged.
    public init() {}

    /// Our setting took effect: every stream's initial window moved by `delta`.
    public mutating func changed(by delta: Int) {
        self.size += delta
    }
}
