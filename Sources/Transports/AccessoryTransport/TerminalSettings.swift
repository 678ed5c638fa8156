import Glibc

/// The settings a terminal device currently has, read back with `tcgetattr`: what
/// ``SerialTransport`` applied, for tests and for `accessory-http -v`.
public struct TerminalSettings: Sendable, Hashable, CustomStringConvertible {
    /// Whether the line is raw as `cfmakeraw` leaves it: no input translation (`ICRNL`, …),
    /// no software flow control (`IXON`), no output processing (`OPOST`), no echo, no line
    /// editing (`ICANON`) and no signal characters (`ISIG`).
    public var isRaw: Bool
    /// The input speed in bits per second; `nil` if it is not one of the rates
    /// ``SerialTransport`` can set (e.g. `B0` or below 1200).
    public var inputBaudRate: Int?
    /// The output speed in bits per second; `nil` as for ``inputBaudRate``.
    public var outputBaudRate: Int?
    /// Bits per character (`CSIZE`).
    public var dataBits: SerialSettings.DataBits
    /// `PARENB` and `PARODD`.
    public var parity: SerialSettings.Parity
    /// `CSTOPB`.
    public var stopBits: SerialSettings.StopBits
    /// `CRTSCTS`.
    public var flowControl: SerialSettings.FlowControl
    /// `CLOCAL`: modem control lines (carrier detect) are ignored.
    public var ignoresModemControlLines: Bool
    /// `CREAD`: the receiver is enabled.
    public var receiverEnabled: Bool
    /// `VMIN`: the fewest bytes a read waits for.
    public var minimumReadBytes: Int
    /// `VTIME`: the read timeout in tenths of a second.
    public var readTimeoutDeciseconds: Int

    /// Decodes a `termios` structure.
    public init(_ attributes: termios) {
        let inputCooked = tcflag_t(IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR | IGNCR | ICRNL | IXON)
        let outputCooked = tcflag_t(OPOST)
        let localCooked = tcflag_t(ECHO | ECHONL | ICANON | ISIG | IEXTEN)
        self.isRaw =
            attributes.c_iflag & inputCooked == 0
            && attributes.c_oflag & outputCooked == 0
            && attributes.c_lflag & localCooked == 0
        var copy = attributes
        self.inputBaudRate = BaudRate.rate(for: cfgetispeed(&copy))
        self.outputBaudRate = BaudRate.rate(for: cfgetospeed(&copy))
        let cflag = attributes.c_cflag
        self.dataBits =
            switch cflag & tcflag_t(CSIZE) {
            case tcflag_t(CS5): .five
            case tcflag_t(CS6): .six
            case tcflag_t(CS7): .seven
            default: .eight
            }
        self.parity =
            if cflag & tcflag_t(PARENB) == 0 { .none } else if cflag & tcflag_t(PARODD) != 0 { .odd } else { .even }
        self.stopBits = cflag & tcflag_t(CSTOPB) != 0 ? .two : .one
        self.flowControl = cflag & tcflag_t(CRTSCTS) != 0 ? .rtscts : .none
        self.ignoresModemControlLines = cflag & tcflag_t(CLOCAL) != 0
        self.receiverEnabled = cflag & tcflag_t(CREAD) != 0
        let (minimum, timeout) = withUnsafeBytes(of: attributes.c_cc) { bytes in
            (Int(bytes[Int(VMIN)]), Int(bytes[Int(VTIME)]))
        }
        self.minimumReadBytes = minimum
        self.readTimeoutDeciseconds = timeout
    }

    /// The settings as ``SerialSettings``, or `nil` if the output speed is not one
    /// ``SerialTransport`` can set.
    public var serialSettings: SerialSettings? {
        guard let baud = self.outputBaudRate else { return nil }
        return SerialSettings(
            baudRate: baud,
            dataBits: self.dataBits,
            parity: self.parity,
            stopBits: self.stopBits,
            flowControl: self.flowControl
        )
    }

    /// e.g. "raw, 115200 8N1, flow control none, CLOCAL, CREAD, VMIN=1, VTIME=0".
    public var description: String {
        let speed = self.outputBaudRate.map(String.init) ?? "unknown speed"
        let framing = SerialSettings.framing(self.dataBits, self.parity, self.stopBits)
        var parts = [
            self.isRaw ? "raw" : "not raw (cooked)", "\(speed) \(framing)", "flow control \(self.flowControl.rawValue)",
        ]
        if self.ignoresModemControlLines { parts.append("CLOCAL") }
        if self.receiverEnabled { parts.append("CREAD") }
        parts.append("VMIN=\(self.minimumReadBytes)")
        parts.append("VTIME=\(self.readTimeoutDeciseconds)")
        return parts.joined(separator: ", ")
    }
}
