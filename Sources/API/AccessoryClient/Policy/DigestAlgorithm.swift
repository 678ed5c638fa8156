import AccessoryCrypto

/// The Digest `algorithm` values this client implements (RFC 7616 §3.3, RFC 2617).
package enum DigestAlgorithm: String, Sendable, Hashable, CaseIterable {
    case md5 = "MD5"
    case md5Session = "MD5-sess"
    case sha256 = "SHA-256"
    case sha256Session = "SHA-256-sess"

    /// Matches the token case-insensitively; `nil` for algorithms not implemented.
    package init?(token: String) {
        guard let match = Self.allCases.first(where: { $0.rawValue.lowercased() == token.lowercased() }) else {
            return nil
        }
        self = match
    }

    /// The hash function behind `H()` and `KD()`.
    package var hash: Digest.Algorithm {
        switch self {
        case .md5, .md5Session: return .md5
        case .sha256, .sha256Session: return .sha256
        }
    }

    /// Whether A1 includes the nonce and cnonce (the `-sess` variants).
    package var isSession: Bool { self == .md5Session || self == .sha256Session }

    /// Preference when a server offers several challenges: SHA-256 beats MD5.
    package var strength: Int { self.hash == .sha256 ? 2 : 1 }
}
