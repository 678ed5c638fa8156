import Glibc

/// The baud rates termios can express on Linux, as `B*` constants. Linux has no portable way
/// to set an arbitrary rate through termios, so a rate missing here is unsupported.
enum BaudRate {
    private static let table: [(rate: Int, constant: speed_t)] = [
        (1200, speed_t(B1200)), (1800, speed_t(B1800)), (2400, speed_t(B2400)),
        (4800, speed_t(B4800)), (9600, speed_t(B9600)), (19200, speed_t(B19200)),
        (38400, speed_t(B38400)), (57600, speed_t(B57600)), (115_200, speed_t(B115200)),
        (230_400, speed_t(B230400)), (460_800, speed_t(B460800)), (500_000, speed_t(B500000)),
        (576_000, speed_t(B576000)), (921_600, speed_t(B921600)), (1_000_000, speed_t(B1000000)),
        (1_152_000, speed_t(B1152000)), (1_500_000, speed_t(B1500000)), (2_000_000, speed_t(B2000000)),
        (2_500_000, speed_t(B2500000)), (3_000_000, speed_t(B3000000)), (3_500_000, speed_t(B3500000)),
        (4_000_000, speed_t(B4000000)),
    ]

    /// Every rate that ``constant(for:)`` accepts, ascending.
    static var supportedRates: [Int] { self.table.map(\.rate) }

    /// The `B*` constant for `rate`, or `nil` if termios cannot express it.
    static func constant(for rate: Int) -> speed_t? {
        self.table.first { $0.rate == rate }?.constant
    }

    /// The rate a `B*` constant stands for, or `nil` for constants outside the table
    /// (such as `B0`, "hang up", or rates below 1200).
    static func rate(for constant: speed_t) -> Int? {
        self.table.first { $0.constant == constant }?.rate
    }
}
