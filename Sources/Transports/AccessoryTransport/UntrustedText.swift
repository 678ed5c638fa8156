/// Text that came from outside (a device's descriptor strings, a certificate's subject and
/// names, a header a device sent), made safe to print on a terminal or into a log line.
///
/// A device or a certificate chooses these bytes. Printed raw, a newline can forge a line of
/// the output that follows (a fake `key pin:` line in `accessory-http trust`), and an escape
/// sequence can hide or recolour text (`ESC[8m` hides what follows). Every C0 control
/// (including newline, carriage return and tab), DEL and every C1 control (U+0080–U+009F, which
/// some terminals treat as escape sequences) is written as `\xNN` / `\u{NNNN}`, and a backslash
/// as `\\`, so the printed form is unambiguous and stays on one line. Invalid UTF-8 is shown as
/// U+FFFD. Printable text, non-ASCII letters included, is kept as it is.
public enum UntrustedText {
    /// `text` with every control character escaped (see ``UntrustedText``).
    public static func printable(_ text: some StringProtocol) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x5C:
                result += "\\\\"
            case 0x00..<0x20, 0x7F:
                result += "\\x" + Self.hex(scalar.value, digits: 2)
            case 0x80..<0xA0, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069:
                // C1 controls, line/paragraph separators and bidirectional overrides (which can
                // reorder what a reader sees, the "Trojan Source" trick).
                result += "\\u{" + Self.hex(scalar.value, digits: 4) + "}"
            default:
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// Decodes `bytes` as UTF-8 (invalid sequences become U+FFFD) and escapes the result.
    public static func printable(bytes: some Sequence<UInt8>) -> String {
        Self.printable(String(decoding: Array(bytes), as: UTF8.self))
    }

    private static func hex(_ value: UInt32, digits: Int) -> String {
        let text = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
