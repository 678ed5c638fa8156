import AccessoryCrypto

/// The emulator's side of a Digest authentication algorithm (RFC 7616 §3.3): the hash and whether it is a session
/// (`-sess`) variant.
struct EmulatorDigestAlgorithm: Sendable, Hashable {
    let hash: Digest.Algorithm
    let isSession: Bool

    /// Accepts `MD5`, `MD5-sess`, `SHA-256`, `SHA-256-sess` in any case.
    init?(name: String) {
        switch name.uppercased() {
        case "MD5": (self.hash, self.isSession) = (.md5, false)
        case "MD5-SESS": (self.hash, self.isSession) = (.md5, true)
        case "SHA-256": (self.hash, self.isSession) = (.sha256, false)
        case "SHA-256-SESS": (self.hash, self.isSession) = (.sha256, true)
        default: return nil
        }
    }

    /// The name as it appears in a challenge.
    var name: String {
        (self.hash == .md5 ? "MD5" : "SHA-256") + (self.isSession ? "-sess" : "")
    }

    /// H(text) as lowercase hex.
    func h(_ text: String) -> String {
        Digest.hex(self.hash, of: Array(text.utf8))
    }
}
