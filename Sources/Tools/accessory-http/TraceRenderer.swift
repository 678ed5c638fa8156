import AccessoryHTTP1
import AccessoryTransport
import NIOCore
import Synchronization

/// Renders a link trace on stderr the way `curl -v` does (`>` sent, `<` received, `*` notes),
/// with body bytes as a hex dump: the packet trace serial and USB links otherwise lack.
final class TraceRenderer: Sendable {
    private struct State {
        var sentShown = 0
        var receivedShown = 0
        var sentHidden = 0
        var receivedHidden = 0
    }

    private let limit: Int
    private let state = TrackedMutex(State())

    init(limit: Int) {
        self.limit = max(0, limit)
    }

    var tracer: LinkTracer {
        LinkTracer { [self] event in self.render(event) }
    }

    private func render(_ event: LinkTracer.Event) {
        switch event {
        case .note(let text):
            StandardError.write("* \(text)\n")
        case .requestHead(let head):
            self.flushHidden()
            self.state.withLock { $0.sentShown = 0 }
            StandardError.write(Self.prefixLines(head, with: "> ") + ">\n")
        case .responseHead(let head):
            self.flushHidden()
            self.state.withLock { $0.receivedShown = 0 }
            StandardError.write(Self.prefixLines(head, with: "< ") + "<\n")
        case .requestBody(let buffer):
            self.dump(buffer, sent: true)
        case .responseBody(let buffer):
            self.dump(buffer, sent: false)
        }
    }

    private func dump(_ buffer: ByteBuffer, sent: Bool) {
        let (offset, shown) = self.state.withLock { state -> (Int, Int) in
            let already = sent ? state.sentShown : state.receivedShown
            let shown = min(buffer.readableBytes, max(0, self.limit - already))
            if sent {
                state.sentShown += shown
                state.sentHidden += buffer.readableBytes - shown
            } else {
                state.receivedShown += shown
                state.receivedHidden += buffer.readableBytes - shown
            }
            return (already, shown)
        }
        guard shown > 0 else { return }
        let bytes = Array(buffer.readableBytesView.prefix(shown))
        StandardError.write(Self.hexDump(bytes, startingAt: offset, prefix: sent ? "> " : "< "))
    }

    /// Reports bytes a message had past the display limit, once the next message starts.
    func flushHidden() {
        let (sentHidden, receivedHidden) = self.state.withLock { state -> (Int, Int) in
            defer { (state.sentHidden, state.receivedHidden) = (0, 0) }
            return (state.sentHidden, state.receivedHidden)
        }
        if sentHidden > 0 { StandardError.write("> … \(sentHidden) more body bytes not shown (--trace-limit)\n") }
        if receivedHidden > 0 {
            StandardError.write("< … \(receivedHidden) more body bytes not shown (--trace-limit)\n")
        }
    }

    /// Each line of a head behind `prefix`, with whatever a device could use to forge a line or
    /// drive the terminal (controls, C1 controls, bidi overrides) escaped by `UntrustedText`.
    static func prefixLines(_ text: String, with prefix: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map {
            prefix + UntrustedText.printable($0) + "\n"
        }.joined()
    }

    /// `00000000  47 45 54 20 …  |GET …|`, 16 bytes a line.
    static func hexDump(_ bytes: [UInt8], startingAt offset: Int, prefix: String) -> String {
        let digits = Array("0123456789abcdef")
        var out = ""
        var index = 0
        while index < bytes.count {
            let line = bytes[index..<min(index + 16, bytes.count)]
            var address = String(offset + index, radix: 16)
            address = String(repeating: "0", count: max(0, 8 - address.count)) + address
            out += prefix + address + "  "
            for (column, byte) in line.enumerated() {
                out.append(digits[Int(byte >> 4)])
                out.append(digits[Int(byte & 0xF)])
                out += column == 7 ? "  " : " "
            }
            if line.count < 16 {
                for column in line.count..<16 { out += column == 7 ? "    " : "   " }
            }
            out += " |"
            for byte in line { out.append((0x20..<0x7F).contains(byte) ? Character(Unicode.Scalar(byte)) : ".") }
            out += "|\n"
            index += 16
        }
        return out
    }
}
