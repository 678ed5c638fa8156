/// A pin: the SHA-256 of a key (SubjectPublicKeyInfo) or of a whole certificate.
///
/// Written as `sha256:BASE64` for a key (the form OpenSSH and HPKP use) and
/// `cert-sha256:BASE64` for a certificate. Hex (64 digits, colons allowed, as
/// `openssl x509 -fingerprint -sha256` prints them) is accepted wherever a pin is parsed;
/// pins are always printed in base64.
public struct TLSPin: Sendable, Hashable, CustomStringConvertible, LosslessStringConvertible {
    /// What a pin's digest is taken over: the key or the whole certificate.
    public enum Kind: Sendable, Hashable {
        /// SHA-256 of the DER SubjectPublicKeyInfo: survives re-issuing a certificate for the
        /// same key. The default, and what pairing records.
        case spki
        /// SHA-256 of the whole DER certificate.
        case certificate
    }

    /// Whether the digest is of the key (``TLSPin/Kind/spki``) or of the whole certificate.
    public let kind: Kind
    /// The 32 digest bytes.
    public let digest: [UInt8]

    /// A pin from its digest. The length is not checked: a digest that is not 32 bytes matches no
    /// certificate.
    ///
    /// - Parameters:
    ///   - kind: What the digest was taken over.
    ///   - digest: The SHA-256 digest, 32 bytes.
    public init(kind: Kind, digest: [UInt8]) {
        self.kind = kind
        self.digest = digest
    }

    /// Parses `sha256:…` or `cert-sha256:…` (base64 or hex).
    public init(parsing text: String) throws(TLSError) {
        let trimmed = text.trimmingWhitespace()
        let kind: Kind
        let value: Substring
        if let rest = trimmed.dropPrefix("sha256:") {
            (kind, value) = (.spki, rest)
        } else if let rest = trimmed.dropPrefix("cert-sha256:") {
            (kind, value) = (.certificate, rest)
        } else {
            throw TLSError(
                .invalidConfiguration,
                "the pin '\(text)' must start with sha256: (key) or cert-sha256: (certificate), then 32 bytes in base64 or hex"
            )
        }
        guard let digest = Self.decodeHex(value) ?? Base64.decode(value), digest.count == 32 else {
            throw TLSError(
                .invalidConfiguration,
                "the pin '\(text)' does not hold a SHA-256 digest (32 bytes in base64, or 64 hex digits)"
            )
        }
        self.init(kind: kind, digest: digest)
    }

    public init?(_ description: String) {
        guard let pin = try? TLSPin(parsing: description) else { return nil }
        self = pin
    }

    public var description: String {
        (self.kind == .spki ? "sha256:" : "cert-sha256:") + Base64.encode(self.digest)
    }

    /// The digest as colon-separated upper-case hex, as `openssl x509 -fingerprint` prints it.
    public var hex: String {
        self.digest.map { byte in
            let text = String(byte, radix: 16, uppercase: true)
            return text.count == 1 ? "0" + text : text
        }.joined(separator: ":")
    }

    /// Whether this pin names `certificate`.
    public func matches(_ certificate: TLSCertificate) -> Bool {
        switch self.kind {
        case .spki: return certificate.spkiSHA256 == self.digest
        case .certificate: return certificate.certificateSHA256 == self.digest
        }
    }

    private static func decodeHex(_ text: Substring) -> [UInt8]? {
        let digits = text.filter { $0 != ":" }
        guard digits.count == 64 else { return nil }
        var bytes: [UInt8] = []
        var index = digits.startIndex
        while index < digits.endIndex {
            let next = digits.index(index, offsetBy: 2)
            guard let byte = UInt8(digits[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        return bytes
    }
}

/// Standard base64 (RFC 4648), with or without padding on input.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let chunk = Array(bytes[index..<min(index + 3, bytes.count)])
            let value =
                (UInt32(chunk[0]) << 16) | (UInt32(chunk.count > 1 ? chunk[1] : 0) << 8)
                | UInt32(chunk.count > 2 ? chunk[2] : 0)
            output.append(Self.alphabet[Int((value >> 18) & 63)])
            output.append(Self.alphabet[Int((value >> 12) & 63)])
            output.append(chunk.count > 1 ? Self.alphabet[Int((value >> 6) & 63)] : UInt8(ascii: "="))
            output.append(chunk.count > 2 ? Self.alphabet[Int(value & 63)] : UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }

    static func decode(_ text: Substring) -> [UInt8]? {
        var values: [UInt8] = []
        for scalar in text.utf8 where scalar != UInt8(ascii: "=") {
            guard let value = Self.alphabet.firstIndex(of: scalar) else { return nil }
            values.append(UInt8(value))
        }
        guard values.count % 4 != 1 else { return nil }
        var bytes: [UInt8] = []
        var index = 0
        while index < values.count {
            let group = values[index..<min(index + 4, values.count)]
            var accumulator: UInt32 = 0
            for value in group { accumulator = (accumulator << 6) | UInt32(value) }
            accumulator <<= UInt32(6 * (4 - group.count))
            let produced = group.count - 1
            for shift in 0..<produced { bytes.append(UInt8((accumulator >> UInt32(16 - 8 * shift)) & 0xFF)) }
            index += 4
        }
        return bytes
    }
}

extension String {
    func trimmingWhitespace() -> String {
        let scalars = self.unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
            let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
        else { return "" }
        return String(scalars[first...last])
    }

    func dropPrefix(_ prefix: String) -> Substring? {
        self.hasPrefix(prefix) ? self.dropFirst(prefix.count) : nil
    }
}
