import AccessoryCrypto
import AccessoryTransport
import COpenSSL

/// A certificate the peer presented, as DER bytes with the facts a trust decision needs.
///
/// The peer chose every byte of it, so the text facts (``subject``, ``issuer``,
/// ``subjectAlternativeNames``) are escaped with AccessoryTransport's `UntrustedText.printable(_:)`:
/// a newline, an escape sequence or a bidirectional override in a name is shown as `\x0A`, `\x1B`,
/// `\u{202E}`, never sent to a terminal as it is (a certificate could otherwise forge the
/// fingerprint lines that `accessory-http trust` prints). Use ``der`` for the exact bytes.
public struct TLSCertificate: Sendable, Hashable, CustomStringConvertible {
    /// The certificate, DER-encoded.
    public let der: [UInt8]
    /// The subject as one line ("CN=accessory, O=Maker"), escaped for printing.
    public let subject: String
    /// The issuer as one line, escaped for printing.
    public let issuer: String
    /// The DNS and IP subject alternative names as text ("DNS:accessory.local, IP:10.0.0.2,
    /// IP:fe80::1"), escaped for printing; empty when the certificate has none.
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
        self.subjectAlternativeNames = Self.alternativeNames(cert)
    }

    /// Whether the certificate carries `name` (a DNS name or an IP address) in its subject
    /// alternative names, or in its CN when it has none: the check a client makes against its
    /// expected name (`X509_check_host` / `X509_check_ip_asc`).
    public func names(_ name: String) -> Bool {
        self.withX509 { ServerTrustEvaluator.certificate($0, names: name) } ?? false
    }

    /// Runs `body` with a parsed copy of the certificate.
    func withX509<Result>(_ body: (OpaquePointer) -> Result) -> Result? {
        let parsed: OpaquePointer? = self.der.withUnsafeBufferPointer { buffer in
            var pointer: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_X509(nil, &pointer, buffer.count)
        }
        guard let parsed else { return nil }
        defer { X509_free(parsed) }
        return body(parsed)
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
        return UntrustedText.printable(bytes: bytes.prefix(max(0, Int(count))))
    }

    /// The DNS and IP names of the subjectAltName extension, escaped, joined with ", ".
    private static func alternativeNames(_ cert: OpaquePointer) -> String {
        guard let names = accessory_X509_subject_alt_names(cert) else { return "" }
        defer { accessory_GENERAL_NAMES_free(names) }
        var items: [String] = []
        for index in 0..<accessory_GENERAL_NAMES_count(names) {
            var data: UnsafePointer<UInt8>?
            var length: Int32 = 0
            let type = accessory_GENERAL_NAMES_get(names, index, &data, &length)
            let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: Int(max(0, length)))) } ?? []
            if type == accessory_GEN_DNS() {
                items.append("DNS:" + UntrustedText.printable(bytes: bytes))
            } else if type == accessory_GEN_IPADD() {
                items.append("IP:" + Self.address(bytes))
            }
        }
        return items.joined(separator: ", ")
    }

    /// An IPv4 or IPv6 address in its usual text form (IPv6 without zero compression).
    private static func address(_ bytes: [UInt8]) -> String {
        switch bytes.count {
        case 4:
            return bytes.map(String.init).joined(separator: ".")
        case 16:
            return stride(from: 0, to: 16, by: 2).map {
                String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16)
            }
            .joined(separator: ":")
        default:
            return "(\(bytes.count)-byte address)"
        }
    }
}
