import NIOCore
import NIOHTTP2

/// Flow-control windows for both sides of a link. HTTP/2's default of 64 KiB per stream and
/// per connection makes a bulk transfer wait for a WINDOW_UPDATE every four frames; a link to
/// one accessory has no other connection to be fair to, so the windows are large. Frames are
/// sized by the line's rate (``maxFrameSize(bytesPerSecond:)``).
///
/// Why not larger: 4 MiB per stream and 8 MiB per connection moved a bulk GET faster on a
/// socketpair (1.5-1.7 GB/s against 1.1), but under uploads and downloads at once (the 16
/// mixed exchanges of HTTP2LinkTests, in an AddressSanitizer build) the connection failed once
/// with InvalidFlowControlWindowSize: swift-nio-http2 computes each connection WINDOW_UPDATE from
/// the window as it was before the updates it has queued but not yet sent (control frames wait
/// while the channel is not writable), so the window is topped up again and again, and the
/// larger the target, the sooner it passes 2^31 - 1. These sizes have run that test under every
/// CI pass since HTTP/2 landed.
public enum HTTP2Windows {
    /// Each stream's receive window, in bytes (1 MiB): announced as SETTINGS_INITIAL_WINDOW_SIZE
    /// and kept topped up to it.
    public static let stream = 1 << 20
    /// Each request stream's receive window on the device side (256 KiB): how much of an upload
    /// a responder takes ahead of its handler (its streams credit the host only as the handler
    /// takes the body). A host's idle bound starts when the last of the body is taken, so what
    /// is held must drain within it (a handler writing to flash at 50 kB/s drains 256 KiB in
    /// 5 s, 2 MiB in 42 s: over the 30 s default). Upload speed over a socketpair is the same at
    /// 256 KiB as at 1 MiB (docs/performance.md).
    public static let responderStream = 256 << 10
    /// The connection's receive window, in bytes (2 MiB), kept topped up to it.
    public static let connection = 2 << 20

    /// The largest DATA frame a link asks its device for (SETTINGS_MAX_FRAME_SIZE). On a line
    /// of known, slow rate (a serial line) HTTP/2's minimum of 16 KiB: one frame is what a small
    /// exchange may wait behind, 1.4 s at 115200 baud already. On a fast or unknown one 64 KiB,
    /// the size our responder writes a body in: a quarter of the frames to decode, deliver and
    /// account for (bulk GET over a socketpair 477-689 -> 685-1 083 MiB/s in alternated runs),
    /// for at most 64 KiB of head-of-line wait (1.6 ms at USB 2.0's 40 MB/s).
    public static func maxFrameSize(bytesPerSecond: Int?) -> Int {
        guard let bytesPerSecond, bytesPerSecond < 10_000_000 else { return 1 << 16 }
        return 1 << 14
    }

    /// The most a host's connection reads from its byte stream at once (256 KiB), as an HTTP/1.1
    /// link does.
    static let readSize = 256 << 10

    /// How a host's connection reads: up to ``readSize`` a read, and the handlers see the end
    /// of each read (the exchange gets what arrived). NIO's default, up to four reads of at most
    /// 64 KiB before that, makes four read system calls and four appends to swift-nio-http2's
    /// decoder for what one read of 256 KiB brings. Four reads of 256 KiB (a whole 1 MiB stream
    /// window between two hand-overs to the exchange, so between two WINDOW_UPDATEs) measured
    /// lower than one. Measured in `loop --http 2 --path /bytes/268435456`, alternated:
    /// the caller on the link's executor 1 834–2 680 → 2 848–3 725 MiB/s (four reads of 256 KiB:
    /// 2 660–3 189); on the pool no clear change (five alternated pairs: 1 897–2 649 →
    /// 1 494–2 503, medians 2 131 → 2 043).
    static func configureReads(of channel: any Channel) throws {
        try channel.syncOptions?.setOption(
            ChannelOptions.recvAllocator,
            value: AdaptiveRecvByteBufferAllocator(minimum: 1024, initial: 16 * 1024, maximum: Self.readSize)
        )
        try channel.syncOptions?.setOption(ChannelOptions.maxMessagesPerRead, value: 1)
    }

    /// The `NIOHTTP2Handler` configuration both ends of a link start from: a stream window of
    /// `streamWindow` (``stream`` for a host, ``responderStream`` for a device), the window of
    /// ``connection``, and (for a link that keeps stream channels) a stream channel that stops
    /// being writable with 256 KiB queued and is writable again at 64 KiB. The caller adds its
    /// own initial settings.
    public static func configuration(streamWindow: Int = Self.stream) -> NIOHTTP2Handler.Configuration {
        var configuration = NIOHTTP2Handler.Configuration()
        configuration.connection.initialSettings = [
            HTTP2Setting(parameter: .initialWindowSize, value: streamWindow)
        ]
        configuration.connection.targetWindowSize = Self.connection
        configuration.stream.targetWindowSize = streamWindow
        configuration.stream.outboundBufferSizeHighWatermark = 256 << 10
        configuration.stream.outboundBufferSizeLowWatermark = 64 << 10
        return configuration
    }
}
