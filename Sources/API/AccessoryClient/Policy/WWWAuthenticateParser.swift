/// A lenient parser for `WWW-Authenticate` values (RFC 9110 §11.6.1, RFC 7235 §4.1):
///
///     challenge  = auth-scheme [ 1*SP ( token68 / #auth-param ) ]
///     auth-param = token BWS "=" BWS ( token / quoted-string )
///
/// Commas separate both challenges and their parameters, so after each comma the parser looks
/// ahead: `name =` continues the current challenge, anything else starts a new one. It works on
/// UTF-8 bytes, never traps, and resynchronises at the next comma after garbage.
package enum WWWAuthenticateParser {
    package static func parse(_ value: String) -> [AuthenticationChallenge] {
        var cursor = Cursor(bytes: Array(value.utf8))
        var challenges: [AuthenticationChallenge] = []
        while true {
            cursor.skip { $0 == .comma || isWhitespace($0) }
            guard !cursor.isAtEnd else { break }
            guard let scheme = cursor.readToken() else {
                cursor.skipPastComma()  // Garbage where a scheme should be.
                continue
            }
            let hadSpace = cursor.skip(isWhitespace) > 0
            if hadSpace, let token68 = cursor.readToken68IfComplete() {
                challenges.append(AuthenticationChallenge(scheme: scheme, token68: token68))
                continue
            }
            var parameters: [String: String] = [:]
            if hadSpace {
                Self.readParameters(&cursor, into: &parameters)
            } else if !cursor.isAtEnd && cursor.peek != .comma {
                cursor.skipPastComma()  // Something glued to the scheme, e.g. `Basic"x"`.
            }
            challenges.append(AuthenticationChallenge(scheme: scheme, parameters: parameters))
        }
        return challenges
    }

    /// Reads `name=value` pairs until the text turns into the next challenge or ends.
    private static func readParameters(_ cursor: inout Cursor, into parameters: inout [String: String]) {
        while true {
            cursor.skip { $0 == .comma || isWhitespace($0) }
            guard cursor.startsParameter() else { return }
            guard let name = cursor.readToken() else { return }
            cursor.skip(isWhitespace)
            cursor.advance()  // The "=" that startsParameter() saw.
            cursor.skip(isWhitespace)
            let value = cursor.peek == .quote ? cursor.readQuotedString() : cursor.readLenientToken()
            let key = name.lowercased()
            // RFC 9110: each parameter name appears once; keep the first if a server repeats one.
            if parameters[key] == nil { parameters[key] = value }
            cursor.skip(isWhitespace)
            if !cursor.isAtEnd && cursor.peek != .comma {
                cursor.skipPastComma()  // Junk after a value; resume at the next element.
            }
        }
    }

    fileprivate static func isWhitespace(_ byte: UInt8) -> Bool { byte == .space || byte == .tab }

    /// tchar (RFC 9110 §5.6.2).
    fileprivate static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    /// token68 characters before the trailing "=" padding (RFC 9110 §11.2).
    fileprivate static func isToken68Byte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"), UInt8(ascii: "+"), UInt8(ascii: "/"):
            return true
        default:
            return false
        }
    }

    /// A read position in the field value's bytes.
    private struct Cursor {
        let bytes: [UInt8]
        var index = 0

        var isAtEnd: Bool { self.index >= self.bytes.count }
        var peek: UInt8? { self.isAtEnd ? nil : self.bytes[self.index] }

        mutating func advance() { if !self.isAtEnd { self.index += 1 } }

        @discardableResult
        mutating func skip(_ predicate: (UInt8) -> Bool) -> Int {
            let start = self.index
            while let byte = self.peek, predicate(byte) { self.index += 1 }
            return self.index - start
        }

        mutating func skipPastComma() {
            var inQuotes = false
            while let byte = self.peek {
                self.index += 1
                if byte == .quote {
                    inQuotes.toggle()
                } else if byte == .backslash && inQuotes {
                    self.advance()
                } else if byte == .comma && !inQuotes {
                    return
                }
            }
        }

        mutating func readToken() -> String? {
            let start = self.index
            self.skip(WWWAuthenticateParser.isTokenByte)
            guard self.index > start else { return nil }
            return String(decoding: self.bytes[start..<self.index], as: UTF8.self)
        }

        /// Reads a token68 if one stands alone up to the end or the next comma; otherwise
        /// leaves the cursor where it was (the text is auth-params).
        mutating func readToken68IfComplete() -> String? {
            let start = self.index
            self.skip(WWWAuthenticateParser.isToken68Byte)
            guard self.index > start else { return nil }
            self.skip { $0 == .equals }
            let end = self.index
            self.skip(WWWAuthenticateParser.isWhitespace)
            if self.isAtEnd || self.peek == .comma {
                return String(decoding: self.bytes[start..<end], as: UTF8.self)
            }
            self.index = start
            return nil
        }

        /// Whether the cursor is at `token BWS "="`, i.e. an auth-param rather than a new
        /// challenge's scheme.
        func startsParameter() -> Bool {
            var probe = self
            guard probe.readToken() != nil else { return false }
            probe.skip(WWWAuthenticateParser.isWhitespace)
            return probe.peek == .equals
        }

        /// Reads a quoted-string, undoing backslash escapes; an unterminated one runs to the end.
        mutating func readQuotedString() -> String {
            self.advance()  // Opening quote.
            var value: [UInt8] = []
            while let byte = self.peek {
                self.index += 1
                if byte == .quote { break }
                if byte == .backslash, let escaped = self.peek {
                    value.append(escaped)
                    self.index += 1
                } else {
                    value.append(byte)
                }
            }
            return String(decoding: value, as: UTF8.self)
        }

        /// Reads an unquoted value up to whitespace or a comma. Lenient on purpose: devices
        /// send base64 nonces (with "/" and "=") unquoted although they are not tokens.
        mutating func readLenientToken() -> String {
            let start = self.index
            self.skip { $0 != .comma && !WWWAuthenticateParser.isWhitespace($0) }
            return String(decoding: self.bytes[start..<self.index], as: UTF8.self)
        }
    }
}

extension UInt8 {
    fileprivate static let space = UInt8(ascii: " ")
    fileprivate static let tab = UInt8(ascii: "\t")
    fileprivate static let comma = UInt8(ascii: ",")
    fileprivate static let quote = UInt8(ascii: "\"")
    fileprivate static let backslash = UInt8(ascii: "\\")
    fileprivate static let equals = UInt8(ascii: "=")
}
