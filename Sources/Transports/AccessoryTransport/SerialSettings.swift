/// How to configure a serial line: speed, character framing and flow control.
///
/// The defaults (115200 baud, 8 data bits, no parity, 1 stop bit, no flow control, "8N1") suit
/// most USB CDC-ACM accessories, which ignore the settings anyway.
public struct SerialSettings: Sendable, Hashable, CustomStringConvertible {
    /// Bits per second. Any positive value is accepted here; opening the line throws
    /// ``TransportError/Code/unsupportedSetting`` if the system has no constant for it.
    public var baudRate: Int
    /// Bits per character.
    public var dataBits: DataBits
    /// Parity bit added to each character.
    public var parity: Parity
    /// Stop bits after each character.
    public var stopBits: StopBits
    /// Hardware flow control.
    public var flowControl: FlowControl

    /// Settings for a serial line; the defaults are 115200 baud, 8N1, no flow control.
    ///
    /// - Parameters:
    ///   - baudRate: Bits per second; ``defaultBaudRate`` (115200) by default. Not checked here:
    ///     opening the line throws ``TransportError/Code/unsupportedSetting`` for a rate the system
    ///     has no constant for.
    ///   - dataBits: Bits per character; ``DataBits/eight`` by default.
    ///   - parity: The parity bit added to each character; ``Parity/none`` by default.
    ///   - stopBits: Stop bits after each character; ``StopBits/one`` by default.
    ///   - flowControl: Hardware flow control; ``FlowControl/none`` by default.
    public init(
        baudRate: Int = SerialSettings.defaultBaudRate,
        dataBits: DataBits = .eight,
        parity: Parity = .none,
        stopBits: StopBits = .one,
        flowControl: FlowControl = .none
    ) {
        self.baudRate = baudRate
        self.dataBits = dataBits
        self.parity = parity
        self.stopBits = stopBits
        self.flowControl = flowControl
    }

    /// 115200 baud.
    public static let defaultBaudRate = 115_200

    /// e.g. "115200 8N1, flow control none".
    public var description: String {
        "\(self.baudRate) \(Self.framing(self.dataBits, self.parity, self.stopBits)), flow control \(self.flowControl.rawValue)"
    }

    /// The conventional short form of a character frame, e.g. "8N1".
    static func framing(_ dataBits: DataBits, _ parity: Parity, _ stopBits: StopBits) -> String {
        let parityLetter =
            switch parity {
            case .none: "N"
            case .even: "E"
            case .odd: "O"
            }
        return "\(dataBits.rawValue)\(parityLetter)\(stopBits.rawValue)"
    }

    /// Bits per character (`CS5` … `CS8`).
    public enum DataBits: Int, Sendable, Hashable, CaseIterable {
        /// 5, 6, 7 or 8 data bits per character, as the case's name says (`CS5` … `CS8`).
        case five = 5, six = 6, seven = 7, eight = 8
    }

    /// Parity (`PARENB`, `PARODD`).
    public enum Parity: String, Sendable, Hashable, CaseIterable {
        /// `none`: no parity bit; `even` or `odd`: a parity bit that makes the number of 1 bits in the
        /// character and its parity bit even or odd.
        case none, even, odd
    }

    /// Stop bits (`CSTOPB` for two).
    public enum StopBits: Int, Sendable, Hashable, CaseIterable {
        /// One or two stop bits after each character, as the case's name says.
        case one = 1, two = 2
    }

    /// Flow control. Software flow control (XON/XOFF) is deliberately absent: it would eat
    /// bytes 0x11 and 0x13 from the binary bodies HTTP carries.
    public enum FlowControl: String, Sendable, Hashable, CaseIterable {
        /// None: the line is always clear to send.
        case none
        /// Hardware RTS/CTS (`CRTSCTS`).
        case rtscts
    }
}
