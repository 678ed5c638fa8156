import NIOCore

/// Names the HTTP/2 frames in one direction of a connection's bytes (RFC 9113 §4.1, §6), for
/// `-v`: I/O-free, bytes in, one line per frame out. It reads frame headers and the payloads
/// of the control frames (SETTINGS, WINDOW_UPDATE, RST_STREAM, GOAWAY, PING); other payloads
/// are skipped, not kept. It never judges: the HTTP/2 handler does that.
struct HTTP2FrameScanner {
    /// The client's connection preface, which comes before its first frame.
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    private enum State {
        case preface(seen: Int)
        case header
        case payload(Header, remaining: Int)
    }

    struct Header {
        let length: Int
        let type: UInt8
        let flags: UInt8
        let stream: UInt32
    }

    /// The most of a control frame's payload read for its line.
    static let keptPayload = 64

    private var state: State
    private var pending: [UInt8] = []

    /// - Parameter client: the bytes a client sends (they start with the preface).
    init(client: Bool) {
        self.state = client ? .preface(seen: 0) : .header
    }

    /// Reads `bytes`; returns a line for every frame whose header (and kept payload) completed.
    mutating func scan(_ bytes: ByteBuffer) -> [String] {
        var lines: [String] = []
        var view = bytes.readableBytesView[...]
        while !view.isEmpty {
            switch self.state {
            case .preface(let seen):
                let take = min(view.count, Self.preface.count - seen)
                view = view.dropFirst(take)
                self.state = seen + take == Self.preface.count ? .header : .preface(seen: seen + take)
                if case .header = self.state { lines.append("preface") }
            case .header:
                let take = min(view.count, 9 - self.pending.count)
                self.pending += view.prefix(take)
                view = view.dropFirst(take)
                guard self.pending.count == 9 else { break }
                let p = self.pending
                let header = Header(
                    length: Int(p[0]) << 16 | Int(p[1]) << 8 | Int(p[2]),
                    type: p[3],
                    flags: p[4],
                    stream: (UInt32(p[5]) << 24 | UInt32(p[6]) << 16 | UInt32(p[7]) << 8 | UInt32(p[8])) & 0x7FFF_FFFF
                )
                self.pending = []
                if header.length == 0 {
                    lines.append(Self.describe(header, payload: []))
                } else {
                    self.state = .payload(header, remaining: header.length)
                }
            case .payload(let header, let remaining):
                let take = min(view.count, remaining)
                let kept = Self.keepsPayload(header.type) ? max(0, Self.keptPayload - self.pending.count) : 0
                self.pending += view.prefix(min(take, kept))
                view = view.dropFirst(take)
                if remaining - take == 0 {
                    lines.append(Self.describe(header, payload: self.pending))
                    self.pending = []
                    self.state = .header
                } else {
                    self.state = .payload(header, remaining: remaining - take)
                }
            }
        }
        return lines
    }

    static func keepsPayload(_ type: UInt8) -> Bool { [0x3, 0x4, 0x6, 0x7, 0x8].contains(type) }

    static let typeNames: [UInt8: String] = [
        0x0: "DATA", 0x1: "HEADERS", 0x2: "PRIORITY", 0x3: "RST_STREAM", 0x4: "SETTINGS", 0x5: "PUSH_PROMISE",
        0x6: "PING", 0x7: "GOAWAY", 0x8: "WINDOW_UPDATE", 0x9: "CONTINUATION",
    ]

    static let settingNames: [UInt16: String] = [
        0x1: "HEADER_TABLE_SIZE", 0x2: "ENABLE_PUSH", 0x3: "MAX_CONCURRENT_STREAMS", 0x4: "INITIAL_WINDOW_SIZE",
        0x5: "MAX_FRAME_SIZE", 0x6: "MAX_HEADER_LIST_SIZE", 0x8: "ENABLE_CONNECT_PROTOCOL",
    ]

    /// RFC 9113 §7.
    static let errorNames: [UInt32: String] = [
        0x0: "NO_ERROR", 0x1: "PROTOCOL_ERROR", 0x2: "INTERNAL_ERROR", 0x3: "FLOW_CONTROL_ERROR",
        0x4: "SETTINGS_TIMEOUT", 0x5: "STREAM_CLOSED", 0x6: "FRAME_SIZE_ERROR", 0x7: "REFUSED_STREAM", 0x8: "CANCEL",
        0x9: "COMPRESSION_ERROR", 0xA: "CONNECT_ERROR", 0xB: "ENHANCE_YOUR_CALM", 0xC: "INADEQUATE_SECURITY",
        0xD: "HTTP_1_1_REQUIRED",
    ]

    static func describe(_ header: Header, payload: [UInt8]) -> String {
        let name = Self.typeNames[header.type] ?? "type 0x\(String(header.type, radix: 16))"
        var text = "\(name) stream=\(header.stream) len=\(header.length)"
        var flags: [String] = []
        switch header.type {
        case 0x0:
            if header.flags & 0x1 != 0 { flags.append("END_STREAM") }
        case 0x1:
            if header.flags & 0x1 != 0 { flags.append("END_STREAM") }
            if header.flags & 0x4 != 0 { flags.append("END_HEADERS") }
        case 0x4, 0x6:
            if header.flags & 0x1 != 0 { flags.append("ACK") }
        case 0x9:
            if header.flags & 0x4 != 0 { flags.append("END_HEADERS") }
        default:
            break
        }
        if !flags.isEmpty { text += " " + flags.joined(separator: " ") }
        func word(_ at: Int) -> UInt32? {
            guard payload.count >= at + 4 else { return nil }
            return UInt32(payload[at]) << 24 | UInt32(payload[at + 1]) << 16 | UInt32(payload[at + 2]) << 8
                | UInt32(payload[at + 3])
        }
        func error(_ code: UInt32) -> String { Self.errorNames[code] ?? "error 0x\(String(code, radix: 16))" }
        switch header.type {
        case 0x3:
            if let code = word(0) { text += " " + error(code) }
        case 0x4:
            var settings: [String] = []
            var at = 0
            while at + 6 <= payload.count {
                let id = UInt16(payload[at]) << 8 | UInt16(payload[at + 1])
                let value = word(at + 2) ?? 0
                settings.append("\(Self.settingNames[id] ?? "0x\(String(id, radix: 16))")=\(value)")
                at += 6
            }
            if !settings.isEmpty { text += " " + settings.joined(separator: " ") }
        case 0x6:
            text += " opaque=" + payload.prefix(8).map { String($0, radix: 16).leftPadded(to: 2) }.joined()
        case 0x7:
            if let last = word(0), let code = word(4) {
                text += " last_stream=\(last & 0x7FFF_FFFF) \(error(code))"
                let debug = payload.dropFirst(8).filter { (0x20..<0x7F).contains($0) }
                if !debug.isEmpty { text += " \"\(String(decoding: debug, as: UTF8.self))\"" }
            }
        case 0x8:
            if let increment = word(0) { text += " +\(increment & 0x7FFF_FFFF)" }
        default:
            break
        }
        return text
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - self.count)) + self
    }
}
