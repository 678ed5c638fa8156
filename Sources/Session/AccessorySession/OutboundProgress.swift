/// Whether bytes the session layer wrote have been leaving the channel's outbound buffer, toward
/// the device: growth between two liveness ticks means the device is taking them, however slowly
/// (docs/framing.md §4). A device that takes nothing leaves them buffered once the line is full.
struct OutboundProgress {
    /// Bytes handed to the channel below, since the handler was added.
    private var written = 0
    /// Of those, how many had left its outbound buffer at the last look.
    private var leftAtLastLook = 0

    mutating func wrote(_ count: Int) {
        self.written &+= count
    }

    /// `buffered`: the channel's outbound bytes not yet written to its descriptor
    /// (`ChannelOptions.bufferedWritableBytes`). True when more have left since the last look.
    mutating func moved(buffered: Int) -> Bool {
        let left = self.written &- buffered
        defer { self.leftAtLastLook = left }
        return left > self.leftAtLastLook
    }
}
