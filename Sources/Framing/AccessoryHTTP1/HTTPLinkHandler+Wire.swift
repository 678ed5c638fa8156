import AccessoryTransport
import NIOCore
import NIOHTTP1
import NIOHTTPCompression

/// What the handler reads off NIOHTTP1's parts: framing facts, parser errors as
/// ``HTTPLinkError``s, and heads as trace text. Pure functions, no state.
extension HTTPLinkHandler {
    static func expectsContinue(_ head: HTTPRequestHead) -> Bool {
        head.headers["expect"].contains { $0.lowercased() == "100-continue" }
    }

    /// Whether a trailer section carries `Connection` or `Transfer-Encoding`, which RFC 9110
    /// §6.5.1 keeps out of it: NIO's parser (llhttp) applies them to its keep-alive decision
    /// anyway (`Connection: close`, or a coding other than `chunked`, make it drop every later
    /// byte), so a link kept for reuse could wait for an answer it will never pass on.
    static func steersTheConnection(_ trailers: HTTPHeaders?) -> Bool {
        guard let trailers else { return false }
        return trailers.contains(name: "connection") || trailers.contains(name: "transfer-encoding")
    }

    /// NIO's decompressor calls a bodiless answer (HEAD, 204, 304) that carries a
    /// Content-Encoding truncated: there was nothing to decode, so it is no error.
    static func hadNothingToDecode(_ error: any Error, bodiless: Bool) -> Bool {
        bodiless && error as? NIOHTTPDecompression.ExtraDecompressionError == .truncatedData
    }

    /// What is wrong with a head's framing that the parser lets through: a Transfer-Encoding
    /// other than `chunked` alone. With another coding last the body would run to the link's
    /// close; with one before `chunked` (`gzip, chunked`) it is a coding this client never
    /// asked for (it sends no TE) and does not decode. Either way the link cannot be trusted.
    static func framingProblem(_ head: HTTPResponseHead) -> String? {
        let codings = head.headers["transfer-encoding"]
            .flatMap { $0.split(separator: ",") }
            .map { String($0.filter { $0 != " " && $0 != "\t" }).lowercased() }
        guard !codings.isEmpty, codings != ["chunked"] else { return nil }
        let named = UntrustedText.printable(codings.joined(separator: ", "))
        return "the device sent Transfer-Encoding: \(named); only chunked, alone, is understood here"
    }

    /// How the end of the response with this final head is found on the wire, when the link
    /// can tell (a body running to the link's close ends the link anyway).
    static func responseEnd(_ head: HTTPResponseHead, isHeadRequest: Bool) -> LinkGuardHandler.ResponseEnd? {
        let status = Int(head.status.code)
        if isHeadRequest || status == 204 || status == 304 { return .afterBody(length: 0) }
        if head.headers["transfer-encoding"].contains(where: { $0.lowercased().contains("chunked") }) {
            return .atEmptyLine
        }
        let lengths = head.headers["content-length"]
        guard lengths.count == 1, let first = lengths.first, let length = Int(first), length >= 0 else { return nil }
        return .afterBody(length: length)
    }

    static func isSelfDelimited(_ head: HTTPResponseHead, isHeadRequest: Bool) -> Bool {
        let status = Int(head.status.code)
        if isHeadRequest || status == 204 || status == 304 || (100..<200).contains(status) { return true }
        if head.headers.contains(name: "content-length") { return true }
        return head.headers["transfer-encoding"].contains { $0.lowercased().contains("chunked") }
    }

    /// - Parameter responseStart: the first bytes of the response, to name a framing error that
    ///   NIO's parser reports only vaguely.
    static func linkError(for error: any Error, responseStart: ByteBuffer = ByteBuffer()) -> HTTPLinkError {
        if let error = error as? HTTPLinkError { return error }
        if let parserError = error as? HTTPParserError {
            switch parserError {
            case .headerOverflow:
                return HTTPLinkError(
                    .responseTooLarge,
                    "the device's response head exceeds the header size or count limit",
                    underlying: error
                )
            case .invalidEOFState:
                return HTTPLinkError(
                    .linkClosed,
                    "the device closed the link before the response was complete (truncated body)",
                    underlying: error
                )
            case .invalidChunkSize:
                return HTTPLinkError(
                    .malformedResponse,
                    "the device sent an invalid chunk size in a chunked body",
                    underlying: error
                )
            case .unexpectedContentLength, .unknown:
                let problem = HeadDiagnosis(responseStart).problem ?? "a malformed HTTP response (\(parserError))"
                return HTTPLinkError(.malformedResponse, "the device sent \(problem)", underlying: error)
            case .invalidConstant, .invalidVersion, .invalidStatus:
                return HTTPLinkError(
                    .malformedResponse,
                    "the device sent something that is not an HTTP/1.1 status line",
                    underlying: error
                )
            default:
                let problem = HeadDiagnosis(responseStart).problem ?? "a malformed HTTP response (\(parserError))"
                return HTTPLinkError(.malformedResponse, "the device sent \(problem)", underlying: error)
            }
        }
        if let decoding = HTTPLinkError.decompressionFailure(error) { return decoding }
        if error is ByteToMessageDecoderError {
            return HTTPLinkError(.malformedResponse, "the device sent a malformed HTTP response", underlying: error)
        }
        if let ended = error as? any StreamEndingError {
            return HTTPLinkError(.linkClosed, ended.message, underlying: error)
        }
        if let ioError = error as? IOError {
            return HTTPLinkError(.linkClosed, "the link failed: \(ioError)", underlying: error)
        }
        return HTTPLinkError(.malformedResponse, "the link failed: \(error)", underlying: error)
    }

    static func render(_ head: HTTPRequestHead) -> String {
        var text = "\(head.method.rawValue) \(head.uri) HTTP/\(head.version.major).\(head.version.minor)"
        for (name, value) in head.headers { text += "\n\(name): \(value)" }
        return text
    }

    /// Trailer fields on one line, as `-v` shows them.
    static func render(_ trailers: HTTPHeaders) -> String {
        trailers.map { "\($0.name): \($0.value)" }.joined(separator: "; ")
    }

    static func render(_ head: HTTPResponseHead) -> String {
        var text = "HTTP/\(head.version.major).\(head.version.minor) \(head.status.code) \(head.status.reasonPhrase)"
        for (name, value) in head.headers { text += "\n\(name): \(value)" }
        return text
    }
}

/// Names what is wrong with a response head that NIO's parser refused without saying why
/// (llhttp's reason does not reach us): ambiguous framing or bare-LF line endings.
struct HeadDiagnosis {
    let problem: String?

    init(_ responseStart: ByteBuffer) {
        let bytes = Array(responseStart.readableBytesView)
        // The head: up to the first empty line (CRLF CRLF, or LF LF from a bare-LF device).
        var lines: [ArraySlice<UInt8>] = []
        var bareLineFeed = false
        var start = bytes.startIndex
        for index in bytes.indices where bytes[index] == UInt8(ascii: "\n") {
            let hasCR = index > start && bytes[index - 1] == UInt8(ascii: "\r")
            if !hasCR { bareLineFeed = true }
            let line = bytes[start..<(hasCR ? index - 1 : index)]
            start = index + 1
            if line.isEmpty { break }
            lines.append(line)
        }
        var lengths: [String] = []
        var transferEncoding = false
        let folded = lines.dropFirst().contains { $0.first == 0x20 || $0.first == 0x09 }
        let nul = lines.contains { $0.contains(0) }
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let name = String(decoding: line[line.startIndex..<colon], as: UTF8.self).lowercased()
            let raw = line[(colon + 1)...].drop { $0 == 0x20 || $0 == 0x09 }
            let value = String(decoding: raw.reversed().drop { $0 == 0x20 || $0 == 0x09 }.reversed(), as: UTF8.self)
            if name == "content-length" { lengths.append(value) }
            if name == "transfer-encoding" { transferEncoding = true }
        }
        if transferEncoding && !lengths.isEmpty {
            self.problem = "both Content-Length and Transfer-Encoding (ambiguous framing)"
        } else if Set(lengths).count > 1 {
            self.problem =
                "conflicting Content-Length values (\(lengths.map { UntrustedText.printable(String($0.prefix(20))) }.joined(separator: ", "))): ambiguous framing"
        } else if bareLineFeed {
            self.problem = "a head with bare LF line endings (HTTP/1.1 needs CRLF)"
        } else if nul {
            self.problem = "a NUL byte in the response head"
        } else if folded {
            self.problem = "a folded header line (obs-fold, a line starting with a space or tab; RFC 9112 §5.2)"
        } else {
            self.problem = nil
        }
    }
}
