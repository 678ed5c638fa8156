/// Whether the device is working through bytes this side wrote (docs/framing.md §4): a device
/// that reads an upload slowly leaves the opener's PING behind the data still in the line, so its
/// PONG comes late, yet it is alive for as long as it keeps taking bytes.
///
/// What the device has taken is what was written minus what is still waiting for it: the
/// channel's outbound buffer and the kernel's send queue under it (``KernelSendQueue``). The
/// kernel may count a queued byte with its bookkeeping (a unix socket reports the memory its
/// buffers take), so "waiting" is never less than the truth, and a device that takes nothing is
/// never seen taking something: its queue only grows or stays.
struct OutboundProgress {
    /// Bytes handed to the channel below.
    private var written = 0
    /// Of those, how many the device had taken at the last look.
    private var takenAtLastLook = 0

    mutating func wrote(_ count: Int) {
        self.written &+= count
    }

    /// Takes the baseline for the next ``tookFromBacklog(waiting:)``.
    mutating func look(waiting: Int) {
        self.takenAtLastLook = self.written &- waiting
    }

    /// `waiting`: written bytes not taken yet (the channel's buffer plus the kernel's send
    /// queue). True when the device took some since the last look and some still wait: it is
    /// working through a backlog, and what it answers waits behind it. Once the line is empty,
    /// nothing excuses its silence any more (a device that read our PING must answer it).
    mutating func tookFromBacklog(waiting: Int) -> Bool {
        let taken = self.written &- waiting
        defer { self.takenAtLastLook = taken }
        return taken > self.takenAtLastLook && waiting > 0
    }
}
