/// One receive window (a stream's or the connection's) and when to top it up: the rule of
/// swift-nio-http2's internal `InboundWindowManager`, which its stream channels apply. A
/// WINDOW_UPDATE goes out when the window, counting the bytes received but not yet taken by the
/// exchange as still open, has fallen to half its target or below; it tops the window up to the
/// target. So the device is held back by what the exchange has not read, never by more.
struct InboundWindow {
    private var target: Int
    /// The window as NIOHTTP2Handler last reported it.
    private var lastSize: Int?
    /// Bytes received and not yet taken by the exchange.
    private var heldBytes = 0
    /// No more WINDOW_UPDATEs: the device has ended its side, or the stream is gone.
    var closed = false

    init(target: Int) {
        self.target = target
    }

    /// NIOHTTP2Handler reported the window's size; returns the increment to send, if any.
    mutating func newWindowSize(_ size: Int) -> Int? {
        self.lastSize = size
        return self.increment(windowSize: size + self.heldBytes)
    }

    /// Our SETTINGS_INITIAL_WINDOW_SIZE took effect, changing every stream's window by `delta`.
    mutating func initialWindowSizeChanged(delta: Int) -> Int? {
        self.target += delta
        guard let lastSize = self.lastSize else { return nil }
        return self.newWindowSize(lastSize + delta)
    }

    /// DATA arrived that the exchange has not taken yet.
    mutating func frameReceived(size: Int) {
        self.heldBytes += size
    }

    /// The exchange took `size` bytes; returns the increment to send, if any.
    mutating func frameEmitted(size: Int) -> Int? {
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
