/// The parameters of an `Authorization: Digest …` header (RFC 7616 §3.4), keys lowercased,
/// quoted values unquoted.
struct DigestParameters: Sendable {
    private(set) var values: [String: String] = [:]

    subscript(key: String) -> String? { self.values[key] }

    /// Parses the header value; `nil` unless it is a Digest credential.
    init?(authorization: String) {
        var rest = Substring(authorization)
        Self.skipSpaces(&rest)
        guard rest.count >= 6, rest.prefix(6).lowercased() == "digest" else { return nil }
        rest = rest.dropFirst(6)
        guard rest.first == " " || rest.first == "\t" else { return nil }

        while true {
            Self.skipSpaces(&rest)
            while rest.first == "," { rest.removeFirst(); Self.skipSpaces(&rest) }
            guard !rest.isEmpty else { break }
            guard let equals = rest.firstIndex(of: "=") else { return nil }
            let key = rest[..<equals].trimmingSpaces().lowercased()
            guard !key.isEmpty else { return nil }
            rest = rest[rest.index(after: equals)...]
            Self.skipSpaces(&rest)
            var value = ""
            if rest.first == "\"" {
                rest.removeFirst()
                var closed = false
                while let character = rest.popFirst() {
                    if character == "\\" {
                        guard let escaped = rest.popFirst() else { return nil }
                        value.append(escaped)
                    } else if character == "\"" {
                        closed = true
                        break
                    } else {
                        value.append(character)
                    }
                }
                guard closed else { return nil }
            } else {
                let end = rest.firstIndex(of: ",") ?? rest.endIndex
                value = String(rest[..<end].trimmingSpaces())
                rest = rest[end...]
            }
            self.values[key] = value
        }
    }

    private static func skipSpaces(_ text: inout Substring) {
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
    }
}

extension Substring {
    fileprivate func trimmingSpaces() -> Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result.removeFirst() }
        while let last = result.last, last == " " || last == "\t" { result.removeLast() }
        return result
    }
}
