import NIOHTTP2

/// What swift-nio-http2's errors mean, in words a caller can act on: its own descriptions name
/// the error type and a source location (`InvalidHTTP2HeaderFieldName(fieldName: X, location:
/// NIOHTTP2/HPACKHeaders+Validation.swift:271)`), and an error code prints as
/// `HTTP2ErrorCode<0x1 ProtocolError>`.
enum HTTP2ErrorText {
    /// The rule the device's frames broke, for the errors a device's answer can cause, or the
    /// device's reset; any other error as swift-nio-http2 describes it.
    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as NIOHTTP2Errors.StreamClosed:
            return "the device reset the HTTP/2 stream (\(Self.name(of: error.errorCode)))"
        case let error as NIOHTTP2Errors.InvalidHTTP2HeaderFieldName:
            return "the device sent the header field name \"\(error.fieldName)\", which HTTP/2 forbids "
                + "(field names are lower case, without spaces or controls: RFC 9113 §8.2.1)"
        case let error as NIOHTTP2Errors.ForbiddenHeaderField:
            return "the device sent \"\(error.name): \(error.value)\", a connection-specific field HTTP/2 forbids "
                + "(RFC 9113 §8.2.2)"
        case let error as NIOHTTP2Errors.MissingPseudoHeader:
            return "the device's answer has no \(error.name) (RFC 9113 §8.3.2)"
        case let error as NIOHTTP2Errors.DuplicatePseudoHeader:
            return "the device's answer has \(error.name) twice (RFC 9113 §8.3)"
        case let error as NIOHTTP2Errors.PseudoHeaderAfterRegularHeader:
            return "the device sent \(error.name) after a regular field (RFC 9113 §8.3)"
        case let error as NIOHTTP2Errors.UnknownPseudoHeader:
            return "the device sent the unknown pseudo-header \(error.name) (RFC 9113 §8.3)"
        case let error as NIOHTTP2Errors.InvalidStatusValue:
            return "the device sent the status \"\(error.value)\", which is not three digits (RFC 9113 §8.3.2)"
        case let error as NIOHTTP2Errors.InvalidPseudoHeaderValue:
            return "the device sent \(error.name) with the value \"\(error.value)\", which HTTP/2 forbids"
        case is NIOHTTP2Errors.ContentLengthViolated:
            return "the device's body did not match its content-length (RFC 9113 §8.1.1)"
        case is NIOHTTP2Errors.ContentLengthHeadersMismatch:
            return "the device sent content-length fields that disagree (RFC 9110 §8.6)"
        case is NIOHTTP2Errors.ContentLengthHeaderMalformedValue:
            return "the device sent a content-length that is not a number (RFC 9110 §8.6)"
        case is NIOHTTP2Errors.TrailersWithoutEndStream:
            return "the device sent trailers that did not end the stream (RFC 9113 §8.1)"
        default:
            return "\(error)"
        }
    }

    /// `code` as RFC 9113 §7 names it (`PROTOCOL_ERROR`), or its number.
    static func name(of code: HTTP2ErrorCode) -> String {
        let value = UInt32(code.networkCode)
        return HTTP2FrameScanner.errorNames[value] ?? "error code 0x\(String(value, radix: 16))"
    }
}
