import HTTPTypes

/// Checks caller-supplied request parts before anything is written, so that a header value or
/// path carrying CR, LF or NUL can never split one request into two on the wire.
///
/// `HTTPFields` built from strings replaces such bytes with spaces on its own; text that comes
/// from people or files (the CLI's `-H`, a config file) goes through here instead, so the
/// caller hears that the input was wrong rather than having it silently changed.
public enum RequestValidation {
    /// Builds a header field from raw text, refusing an invalid name or a value with CR, LF or NUL.
    public static func field(name: String, value: String) throws(HTTPLinkError) -> HTTPField {
        guard let fieldName = HTTPField.Name(name) else {
            throw HTTPLinkError(
                .invalidRequest,
                "invalid header name \(quoted(name)): names are tokens (letters, digits and !#$%&'*+-.^_`|~), with no spaces or colons"
            )
        }
        for byte in value.utf8 where byte == 0x0D || byte == 0x0A || byte == 0x00 {
            let what = byte == 0 ? "NUL" : (byte == 0x0D ? "CR" : "LF")
            throw HTTPLinkError(
                .invalidRequest,
                "the value of header \(name) contains \(what); header values must be a single line"
            )
        }
        return HTTPField(name: fieldName, value: value)
    }

    /// Parses a `Name: value` line as given to curl's `-H`.
    public static func headerLine(_ line: String) throws(HTTPLinkError) -> HTTPField {
        guard let colon = line.firstIndex(of: ":") else {
            throw HTTPLinkError(.invalidRequest, "header \(quoted(line)) has no colon; write it as 'Name: value'")
        }
        let name = String(line[..<colon])
        let value = line[line.index(after: colon)...].drop(while: { $0 == " " || $0 == "\t" })
        return try field(name: name, value: String(value))
    }

    /// Checks a request target as the caller wrote it, before `HTTPRequest` (which turns CR,
    /// LF, NUL and DEL into spaces and trims them at the ends) can hide what was wrong.
    public static func validate(path: String) throws(HTTPLinkError) {
        guard !path.isEmpty else {
            throw HTTPLinkError(.invalidRequest, "the request has no path; use \"/\" for the root")
        }
        for byte in path.utf8 where byte <= 0x20 || byte == 0x7F {
            throw HTTPLinkError(
                .invalidRequest,
                "the path \(quoted(path)) contains a space or control character; percent-encode it (e.g. %20)"
            )
        }
    }

    /// Checks a request's path and authority; throws before anything reaches the wire.
    public static func validate(_ request: HTTPRequest) throws(HTTPLinkError) {
        guard let path = request.path, !path.isEmpty else {
            throw HTTPLinkError(.invalidRequest, "the request has no path; use \"/\" for the root")
        }
        for byte in path.utf8 where byte <= 0x20 || byte == 0x7F {
            throw HTTPLinkError(
                .invalidRequest,
                "the path \(quoted(path)) contains a space or control character; percent-encode it (e.g. %20)"
            )
        }
        if let authority = request.authority {
            for byte in authority.utf8 where byte <= 0x20 || byte == 0x7F || byte == UInt8(ascii: "/") {
                throw HTTPLinkError(.invalidRequest, "the host \(quoted(authority)) contains an invalid character")
            }
        }
    }

    static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\r": result += "\\r"
            case "\n": result += "\\n"
            case "\0": result += "\\0"
            case "\"": result += "\\\""
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}
