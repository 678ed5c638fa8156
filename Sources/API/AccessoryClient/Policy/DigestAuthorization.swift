import AccessoryCrypto

/// Computes the `Authorization` value for the Digest scheme (RFC 7616 §3.4, RFC 2617 §3.2.2,
/// and the RFC 2069 form when the server sends no qop).
package enum DigestAuthorization {
    /// The request-digest (`response` parameter) as lowercase hex.
    /// - Parameters:
    ///   - method: The request method, e.g. `GET`.
    ///   - uri: The request target as sent (path and query).
    ///   - nonceCount: The `nc` value, counting requests made with this nonce from 1.
    ///   - cnonce: The client nonce (ignored in the RFC 2069 form).
    /// - Throws: ``AuthenticationFailure/unsupportedAlgorithm(_:)`` if libcrypto refuses the
    ///   hash (MD5 under a FIPS provider).
    package static func response(
        challenge: DigestChallenge,
        credentials: Credentials,
        method: String,
        uri: String,
        nonceCount: UInt32,
        cnonce: String
    ) throws(AuthenticationFailure) -> String {
        let algorithm = challenge.algorithm
        func h(_ text: String) throws(AuthenticationFailure) -> String {
            let hex = Digest.hex(algorithm.hash, of: Array(text.utf8))
            guard !hex.isEmpty else { throw .unsupportedAlgorithm("\(algorithm.rawValue) (unavailable in libcrypto)") }
            return hex
        }
        var ha1 = try h("\(credentials.user):\(challenge.realm):\(credentials.password)")
        if algorithm.isSession {
            ha1 = try h("\(ha1):\(challenge.nonce):\(cnonce)")
        }
        let ha2 = try h("\(method):\(uri)")
        if challenge.usesQOP {
            return try h("\(ha1):\(challenge.nonce):\(Self.nonceCountString(nonceCount)):\(cnonce):auth:\(ha2)")
        }
        return try h("\(ha1):\(challenge.nonce):\(ha2)")
    }

    /// The complete field value, `Digest username="…", realm="…", …`.
    package static func value(
        challenge: DigestChallenge,
        credentials: Credentials,
        method: String,
        uri: String,
        nonceCount: UInt32,
        cnonce: String
    ) throws(AuthenticationFailure) -> String {
        let response = try Self.response(
            challenge: challenge,
            credentials: credentials,
            method: method,
            uri: uri,
            nonceCount: nonceCount,
            cnonce: cnonce
        )
        var parts: [String] = []
        if challenge.userhash {
            let hashed = Digest.hex(challenge.algorithm.hash, of: Array("\(credentials.user):\(challenge.realm)".utf8))
            parts.append("username=\(Self.quoted(hashed))")
        } else if credentials.user.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value < 0x7F }) {
            parts.append("username=\(Self.quoted(credentials.user))")
        } else {
            // RFC 7616 §3.4.4: non-ASCII names use the RFC 8187 extended notation.
            parts.append("username*=UTF-8''\(Self.extendedValue(credentials.user))")
        }
        parts.append("realm=\(Self.quoted(challenge.realm))")
        parts.append("uri=\(Self.quoted(uri))")
        if challenge.algorithmWasSent {
            parts.append("algorithm=\(challenge.algorithm.rawValue)")
        }
        parts.append("nonce=\(Self.quoted(challenge.nonce))")
        if challenge.usesQOP {
            parts.append("nc=\(Self.nonceCountString(nonceCount))")
            parts.append("cnonce=\(Self.quoted(cnonce))")
            parts.append("qop=auth")
        }
        parts.append("response=\(Self.quoted(response))")
        if let opaque = challenge.opaque {
            parts.append("opaque=\(Self.quoted(opaque))")
        }
        if challenge.userhash {
            parts.append("userhash=true")
        }
        return "Digest " + parts.joined(separator: ", ")
    }

    /// `nc` is exactly 8 lowercase hex digits (RFC 7616 §3.4).
    package static func nonceCountString(_ count: UInt32) -> String {
        let hex = String(count, radix: 16)
        return String(repeating: "0", count: max(0, 8 - hex.count)) + hex
    }

    private static func quoted(_ text: String) -> String {
        var out = "\""
        for character in text {
            if character == "\"" || character == "\\" { out.append("\\") }
            out.append(character)
        }
        return out + "\""
    }

    /// RFC 8187 value-chars: attr-char kept, everything else percent-encoded as UTF-8.
    private static func extendedValue(_ text: String) -> String {
        let attrChars = Set("!#$&+-.^_`|~".utf8)
        var out = ""
        for byte in text.utf8 {
            let isAlphanumeric =
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            if isAlphanumeric || attrChars.contains(byte) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + [byte].hexString.uppercased()
            }
        }
        return out
    }
}
