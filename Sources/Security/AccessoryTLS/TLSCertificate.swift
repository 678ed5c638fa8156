import AccessoryCrypto
import COpenSSL

/// A certificate the peer presented, as DER bytes with the facts a trust decision needs.
public struct TLSCertificate: Sendable, Hashable, CustomStringConvertible {
    /// The certificate, DER-encoded.
    public let der: [UInt8]
    /// The subject as one line ("CN=accessory, O=Maker").
    public let subject: String
    /// The issuer as one line.
    public let issuer: String
    /// The subject alternative names as text ("DNS:accessory.local, IP:10.0.0.2"), empty when
    /// the certificate has none.
    public let subjectAlternativeNames: String
    /// SHA-256 of the DER-encoded SubjectPublicKeyInfo: the key's fingerprint, which survives
    /// re-issuing the certificate with the same key.
    public let spkiSHA256: [UInt8]
    /// SHA-256 of the whole DER certificate.
    public let certificateSHA256: [UInt8]

    /// The key's pin, as `sha256:BASE64` (what `--pin` and known_accessories take).
    public var spkiPin: TLSPin { TLSPin(kind: .spki, digest: self.spkiSHA256) }
    /// The certificate's pin, as `cert-sha256:BASE64`.
    public var certificatePin: TLSPin { TLSPin(kind: .certificate, digest: self.certificateSHA256) }

    public var description: String { "\(self.subject) [\(self.spkiPin)]" }

    /// Reads the certificate facts from an OpenSSL `X509*` (borrowed, not freed).
    init?(x509 cert: OpaquePointer) {
        guard let der = Self.encode(cert, i2d_X509) else { return nil }
        guard let spki = X509_get_X509_PUBKEY(cert), let spkiDER = Self.encode(spki, i2d_X509_PUBKEY) else {
            return nil
        }
        self.der = der
        self.spkiSHA256 = Self.sha256(spkiDER)
        self.certificateSHA256 = Self.sha256(der)
        self.subject = Self.oneLine(X509_get_subject_name(cert))
        self.issuer = Self.oneLine(X509_get_issuer_name(cert))
        var buffer = [CChar](repeating: 0, count: 1024)
        _ = buffer.withUnsafeMutableBufferPointer { accessory_X509_san_text(cert, $0.baseAddress, $0.count) }
        self.subjectAlternativeNames = String(
            decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) },
            as: UTF8.self
        )
    }

    /// Parses one DER certificate.
    public init(der: [UInt8]) throws(TLSError) {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var pointer: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_X509(nil, &pointer, buffer.count)
        }
        guard let parsed else {
            throw TLSError(
                .invalidConfiguration,
                "not a DER certificate: \(OpenSSLErrorQueue.drainText(or: "unreadable"))"
            )
        }
        defer { X509_free(parsed) }
        guard let value = TLSCertificate(x509: parsed) else {
            throw TLSError(.invalidConfiguration, "the certificate could not be re-encoded")
        }
        self = value
    }

    /// Reads every certificate from a PEM file.
    public static func load(pemFile path: String) throws(TLSError) -> [TLSCertificate] {
        OpenSSLErrorQueue.clear()
        guard let bio = BIO_new_file(path, "r") else {
            throw TLSError(
                .invalidConfiguration,
                "cannot read the certificate file \(path): \(OpenSSLErrorQueue.drainText(or: "open failed"))"
            )
        }
        defer { BIO_free(bio) }
        var certificates: [TLSCertificate] = []
        while let cert = PEM_read_bio_X509(bio, nil, nil, nil) {
            defer { X509_free(cert) }
            if let value = TLSCertificate(x509: cert) { certificates.append(value) }
        }
        OpenSSLErrorQueue.clear()  // the read that ends the loop queues "no start line"
        if certificates.isEmpty {
            throw TLSError(
                .invalidConfiguration,
                "\(path) holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)"
            )
        }
        return certificates
    }

    private static func encode(
        _ object: OpaquePointer,
        _ encoder: (OpaquePointer?, UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?) -> Int32
    ) -> [UInt8]? {
        let length = encoder(object, nil)
        guard length > 0 else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(length))
        let written = bytes.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return encoder(object, &cursor)
        }
        return written == length ? bytes : nil
    }

    private static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        guard var digest = Digest(.sha256) else { return [] }
        digest.update(bytes)
        return digest.finalize()
    }

    private static func oneLine(_ name: OpaquePointer?) -> String {
        guard let name else { return "" }
        guard let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        // RFC 2253-like, but in the natural order: "CN=…, O=…".
        let flags = accessory_XN_FLAG_ONELINE()
        guard X509_NAME_print_ex(bio, name, 0, flags) >= 0 else { return "" }
        var bytes = [UInt8](repeating: 0, count: Int(BIO_ctrl_pending(bio)))
        let count = bytes.withUnsafeMutableBytes { BIO_read(bio, $0.baseAddress, Int32($0.count)) }
        return String(decoding: bytes.prefix(max(0, Int(count))), as: UTF8.self)
    }
}
