import NIOCore
import NIOHTTP1

/// What the handler reads off NIOHTTP1's parts: framing facts, parser errors as
/// ``HTTPLinkError``s, and heads as trace text. Pure functions, no state.
extension HTTPLinkHandler {
    static func expectsContinue(_ head: HTTPRequestHead) -> Bool {
        head.headers["expect"].contains { $0.lowercased() == "100-continue" }
    }

    static func isSelfDelimited(_ head: HTTPResponseHead, isHeadRequest: Bool) -> Bool {
        let status = Int(head.status.code)
        if isHeadRequest || status == 204 || status == 304 || (100..<200).contains(status) { return true }
        if head.headers.contains(name: "content-length") { return true }
        return head.headers["transfer-encoding"].contains { $0.lowercased().contains("chunked") }
    }

    static func linkError(for error: any Error) -> HTTPLinkError {
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
            case .unexpectedContentLength:
                return HTTPLinkError(
                    .malformedResponse,
                    "the device sent both Content-Length and Transfer-Encoding (ambiguous framing)",
                    underlying: error
                )
            case .invalidConstant, .invalidVersion, .invalidStatus:
                return HTTPLinkError(
                    .malformedResponse,
                    "the device sent something that is not an HTTP/1.1 status line",
                    underlying: error
                )
            default:
                return HTTPLinkError(
                    .malformedResponse,
                    "the device sent a malformed HTTP response (\(parserError))",
                    underlying: error
                )
            }
        }
        if error is ByteToMessageDecoderError {
            return HTTPLinkError(.malformedResponse, "the device sent a malformed HTTP response", underlying: error)
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

    static func render(_ head: HTTPResponseHead) -> String {
        var text = "HTTP/\(head.version.major).\(head.version.minor) \(head.status.code) \(head.status.reasonPhrase)"
        for (name, value) in head.headers { text += "\n\(name): \(value)" }
        return text
    }
}
