import COpenSSL

/// A message digest computed with the system libcrypto (OpenSSL's EVP interface).
///
/// The package already links the system OpenSSL for TLS, so hashing uses it too instead of
/// bringing in another crypto library. Only the algorithms HTTP needs are offered: SHA-256
/// (Digest authentication, upload checks) and MD5 (RFC 2617 Digest, still common on devices).
public struct Digest: ~Copyable {
    public enum Algorithm: Sendable, Hashable {
        case md5
        case sha256

        var evp: OpaquePointer? {
            switch self {
            case .md5: return EVP_md5()
            case .sha256: return EVP_sha256()
            }
        }
    }

    private let context: OpaquePointer

    /// Starts a digest. Returns `nil` only if libcrypto cannot allocate a context or the
    /// algorithm is disabled in this OpenSSL build (for example MD5 under a FIPS provider).
    public init?(_ algorithm: Algorithm) {
        guard let context = EVP_MD_CTX_new() else { return nil }
        guard EVP_DigestInit_ex(context, algorithm.evp, nil) == 1 else {
            EVP_MD_CTX_free(context)
            return nil
        }
        self.context = context
    }

    deinit { EVP_MD_CTX_free(self.context) }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        _ = EVP_DigestUpdate(self.context, base, bytes.count)
    }

    public mutating func update<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        let done: Void? = bytes.withContiguousStorageIfAvailable { self.update(UnsafeRawBufferPointer($0)) }
        if done == nil {
            let copy = Array(bytes)
            copy.withUnsafeBytes { self.update($0) }
        }
    }

    /// Finishes the digest and returns its bytes.
    public consuming func finalize() -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        _ = output.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(self.context, $0.baseAddress, &length) }
        return Array(output.prefix(Int(length)))
    }

    /// The digest of `bytes` as lowercase hex, the form HTTP Digest authentication and
    /// `sha256sum` use.
    public static func hex<Bytes: Sequence>(_ algorithm: Algorithm, of bytes: Bytes) -> String
    where Bytes.Element == UInt8 {
        guard var digest = Digest(algorithm) else { return "" }
        digest.update(bytes)
        return digest.finalize().hexString
    }
}

extension Sequence where Element == UInt8 {
    /// The bytes as lowercase hexadecimal.
    public var hexString: String {
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(self.underestimatedCount * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Cryptographically strong random bytes from libcrypto (for Digest client nonces).
public func secureRandomBytes(_ count: Int) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    let ok = bytes.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
    if ok != 1 {
        // libcrypto's generator failed (no entropy source); fall back to the system generator.
        var generator = SystemRandomNumberGenerator()
        for index in bytes.indices { bytes[index] = UInt8.random(in: .min ... .max, using: &generator) }
    }
    return bytes
}
