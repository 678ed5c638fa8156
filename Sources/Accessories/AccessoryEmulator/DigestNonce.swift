import AccessoryCrypto

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Stateless Digest nonces: `TIMESTAMP-TAG`, where TAG is a keyed SHA-256 of the timestamp with
/// a per-process secret. A nonce is valid if its tag matches and it is not too old, so the
/// emulator keeps no table of issued nonces.
enum DigestNonce {
    /// How long a nonce stays valid; an older one earns a challenge with `stale=true`.
    static let lifetimeSeconds = 300

    /// Random once per process, so nonces from another run are rejected.
    private static let secret: String = secureRandomBytes(32).hexString

    /// The `opaque` value of every challenge.
    static let opaque: String = String(Digest.hex(.sha256, of: Array("opaque:\(secret)".utf8)).prefix(32))

    enum Verdict { case valid, stale, invalid }

    static func issue(now: Int = Self.now()) -> String {
        "\(now)-\(Self.tag(for: now))"
    }

    static func verify(_ nonce: String, now: Int = Self.now()) -> Verdict {
        let parts = nonce.split(separator: "-", maxSplits: 1)
        guard parts.count == 2, let issued = Int(parts[0]),
            Self.constantTimeEquals(String(parts[1]), Self.tag(for: issued))
        else { return .invalid }
        guard issued <= now + 5 else { return .invalid }
        return now - issued > Self.lifetimeSeconds ? .stale : .valid
    }

    static func now() -> Int { Int(time(nil)) }

    private static func tag(for timestamp: Int) -> String {
        String(Digest.hex(.sha256, of: Array("\(secret):\(timestamp)".utf8)).prefix(32))
    }

    /// Compares without an early exit, so timing does not reveal how much of a guess was right.
    static func constantTimeEquals(_ lhs: String, _ rhs: String) -> Bool {
        let a = Array(lhs.utf8), b = Array(rhs.utf8)
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
