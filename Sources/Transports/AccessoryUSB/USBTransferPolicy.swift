/// How bytes are cut into bulk transfers: pure rules, kept apart from libusb so they are tested
/// on machines without USB.
public struct USBTransferPolicy: Sendable, Hashable {
    /// The largest transfer in either direction, in bytes; rounded down to a multiple of the
    /// endpoint's packet size by ``transferSize(maxPacketSize:)``. 16 KiB by default: larger
    /// transfers fail on some embedded kernels.
    public var maxTransferSize: Int
    /// Transfers kept in flight in each direction (8 by default: usbmuxd measured 7.5 → 23.8 MB/s
    /// going from one to three reads in flight, and in the QEMU test 8 beat 3 by a sixth each
    /// way, docs/performance.md).
    public var transfersInFlight: Int
    /// Whether a write whose length is a multiple of wMaxPacketSize is followed by a zero-length
    /// packet, so the device's read ends there instead of waiting for more.
    public var zeroLengthPackets: Bool
    /// How long OUT transfers may wait without the device taking one before the link fails, in
    /// milliseconds (0: forever). It counts from the last transfer the device took, not from each
    /// transfer's submission, so however many wait, a device that takes one transfer (16 KiB by
    /// default) per timeout is not timed out; a slower one is.
    public var writeTimeoutMilliseconds: UInt32

    /// A policy; the defaults are 16 KiB transfers, 8 in flight each way, zero-length packets on
    /// and a 30 s write timeout.
    ///
    /// - Parameters:
    ///   - maxTransferSize: The largest transfer in bytes (16384 by default).
    ///   - transfersInFlight: Transfers kept in flight in each direction (8 by default).
    ///   - zeroLengthPackets: Whether a write that fills whole packets is followed by a zero-length
    ///     packet (`true` by default).
    ///   - writeTimeoutMilliseconds: How long OUT transfers may wait without the device taking one,
    ///     in milliseconds; 0 waits forever (30000 by default).
    public init(
        maxTransferSize: Int = 16 * 1024,
        transfersInFlight: Int = 8,
        zeroLengthPackets: Bool = true,
        writeTimeoutMilliseconds: UInt32 = 30_000
    ) {
        self.maxTransferSize = maxTransferSize
        self.transfersInFlight = transfersInFlight
        self.zeroLengthPackets = zeroLengthPackets
        self.writeTimeoutMilliseconds = writeTimeoutMilliseconds
    }

    /// The transfer length for an endpoint: ``maxTransferSize`` rounded down to a multiple of
    /// `maxPacketSize`, never less than one packet. A bogus packet size (0) counts as 512.
    public func transferSize(maxPacketSize: Int) -> Int {
        let packet = maxPacketSize > 0 ? maxPacketSize : 512
        let rounded = (max(self.maxTransferSize, packet) / packet) * packet
        return rounded
    }

    /// Whether a write of `length` bytes needs a zero-length packet after it.
    ///
    /// A ZLP tells the device "that was all for now": a read of more bytes than arrived ends
    /// there instead of waiting. When more bytes are already waiting to follow at once
    /// (`moreBytesWaiting`), the next transfer continues the device's read and the ZLP would
    /// only cut it short: the device then reads a whole transfer at a time instead of its whole
    /// buffer (a 16 KiB transfer and a ZLP per 64 KiB read), so it is left out. The gadget side
    /// follows the same rule (a ZLP whenever the link has nothing more to send at that moment).
    ///
    /// - Parameters:
    ///   - length: The bytes in the write.
    ///   - maxPacketSize: The endpoint's wMaxPacketSize.
    ///   - moreBytesWaiting: Whether the next write's bytes are already at hand.
    public func needsZeroLengthPacket(afterWriting length: Int, maxPacketSize: Int, moreBytesWaiting: Bool = false)
        -> Bool
    {
        self.zeroLengthPackets && !moreBytesWaiting && length > 0 && maxPacketSize > 0 && length % maxPacketSize == 0
    }

    /// How long to wait before resubmitting a read after `consecutive` zero-length reads in a
    /// row, in milliseconds. One ZLP is normal (it ends a transfer that filled whole packets),
    /// so the first is resubmitted at once; a device that keeps answering with nothing is
    /// polled at 10 ms × 1.25ⁿ, at most once a second (the ipp-usb back-off).
    public static func zeroLengthReadDelay(consecutive: Int) -> Int {
        guard consecutive > 1 else { return 0 }
        var delay = 10.0
        for _ in 2..<min(consecutive, 40) { delay *= 1.25 }
        return min(Int(delay), 1000)
    }
}
