import COpenSSL

/// One client connection's trust decision (see ``TLSTrust`` for the order of the rules).
/// Lives on the connection's event loop; OpenSSL calls it from inside the handshake.
final class ServerTrustEvaluator {
    private let configuration: TLSConfiguration
    private let pairedEntry: TrustStore.Entry?
    /// Why the chain was refused, for the handshake error.
    private(set) var rejection: TLSError?
    /// A first-use pairing to write once the handshake has completed.
    private(set) var pinToRemember: (identity: String, certificate: TLSCertificate)?
    /// Set when the chain was accepted without any check (insecure mode).
    private(set) var acceptedInsecurely = false

    init(configuration: TLSConfiguration, pairedEntry: TrustStore.Entry?) {
        self.configuration = configuration
        self.pairedEntry = pairedEntry
    }

    func evaluate(_ store: OpaquePointer) -> Bool {
        let certificates = Self.presentedChain(store)
        guard let leaf = certificates.first else {
            self.rejection = TLSError(.untrustedCertificate, "the accessory presented no certificate")
            return false
        }
        let trust = self.configuration.trust
        if trust.insecureSkipVerification {
            self.acceptedInsecurely = true
            return true
        }
        let chainVerified = X509_verify_cert(store) == 1
        let chainError =
            chainVerified ? nil : String(cString: X509_verify_cert_error_string(Int(X509_STORE_CTX_get_error(store))))
        OpenSSLErrorQueue.clear()
        var rejection = self.builtInDecision(
            leaf: leaf,
            chain: certificates,
            chainVerified: chainVerified,
            chainError: chainError,
            store: store
        )
        if let evaluator = trust.evaluator {
            let facts = TLSServerTrust(
                certificates: certificates,
                expectedName: self.configuration.serverName,
                chainVerified: chainVerified,
                chainError: chainError,
                defaultRejection: rejection
            )
            switch evaluator.evaluate(facts) {
            case .trust: rejection = nil
            case .reject(let reason):
                rejection = TLSError(
                    .untrustedCertificate,
                    "the app's trust callback refused the accessory's certificate (\(leaf.subject)): \(reason)"
                )
            case .useDefault: break
            }
        }
        if let rejection {
            self.rejection = rejection
            self.pinToRemember = nil
            X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION)
            return false
        }
        return true
    }

    private func builtInDecision(
        leaf: TLSCertificate,
        chain: [TLSCertificate],
        chainVerified: Bool,
        chainError: String?,
        store: OpaquePointer
    ) -> TLSError? {
        let trust = self.configuration.trust
        let name = self.configuration.serverName
        let described =
            "\(leaf.subject)\(leaf.subjectAlternativeNames.isEmpty ? "" : " (\(leaf.subjectAlternativeNames))")"
        // 1. The expected identity, whenever one is configured.
        if let name, let leafX509 = X509_STORE_CTX_get0_cert(store), !Self.certificate(leafX509, names: name) {
            return TLSError(
                .nameMismatch,
                "the accessory's certificate is not for '\(name)': it names \(described); check --tls-name, or the accessory's certificate"
            )
        }
        // 2. Pins.
        if !trust.pins.isEmpty {
            if chain.contains(where: { certificate in trust.pins.contains { $0.matches(certificate) } }) { return nil }
            return TLSError(
                .pinMismatch,
                "the accessory's certificate \(described) matches none of the pins: it has key \(leaf.spkiPin) (certificate \(leaf.certificatePin)); expected \(trust.pins.map(\.description).joined(separator: " or "))"
            )
        }
        // 3. Pairing.
        if let pairing = trust.pairing {
            if let known = self.pairedEntry {
                if known.pin.matches(leaf) { return nil }
                return TLSError(
                    .pairingMismatch,
                    """
                    the accessory '\(pairing.identity)' presented a DIFFERENT key than the one paired with it: \
                    remembered \(known.pin), presented \(leaf.spkiPin) (\(described)). \
                    Someone may be intercepting the link, or the accessory was reset. Refusing. \
                    If the change is expected, forget it ('accessory-http trust --forget \(pairing.identity)', or remove its line from \(known.file)) and pair again with 'accessory-http trust'.
                    """
                )
            }
            if pairing.mode == .trustOnFirstUse {
                self.pinToRemember = (pairing.identity, leaf)
                return nil
            }
        }
        // 4. A verified chain, with a name.
        if chainVerified {
            if name == nil {
                return TLSError(
                    .noIdentity,
                    "the accessory's certificate \(described) chains to a trusted root, but no expected name was configured, so anything that CA signed would be accepted; give the expected name (--tls-name), a pin (--pin \(leaf.spkiPin)) or pair the accessory (accessory-http trust)"
                )
            }
            return nil
        }
        let pairingHint =
            trust.pairing.map { "pair it with 'accessory-http trust' (identity '\($0.identity)'), " } ?? ""
        return TLSError(
            .untrustedCertificate,
            "the accessory's certificate is not trusted: \(chainError ?? "verification failed") — \(described), key \(leaf.spkiPin). To trust it, \(pairingHint)pin it (--pin \(leaf.spkiPin)) or add its CA (--cacert FILE)"
        )
    }

    /// Checks `name` (a DNS name or an IP address) against the certificate's SAN, or its CN
    /// when it carries no SAN (OpenSSL's default rule).
    private static func certificate(_ cert: OpaquePointer, names name: String) -> Bool {
        if Self.isIPAddress(name) {
            return X509_check_ip_asc(cert, name, 0) == 1
        }
        return X509_check_host(cert, name, name.utf8.count, 0, nil) == 1
    }

    static func isIPAddress(_ name: String) -> Bool {
        if name.contains(":") { return true }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { UInt8($0) != nil }
    }

    /// The certificates the peer sent, leaf first.
    private static func presentedChain(_ store: OpaquePointer) -> [TLSCertificate] {
        var result: [TLSCertificate] = []
        guard let leaf = X509_STORE_CTX_get0_cert(store), let parsed = TLSCertificate(x509: leaf) else { return result }
        result.append(parsed)
        if let untrusted = X509_STORE_CTX_get0_untrusted(store) {
            for index in 0..<accessory_sk_X509_num(untrusted) {
                guard let cert = accessory_sk_X509_value(untrusted, index), let parsed = TLSCertificate(x509: cert)
                else { continue }
                if parsed != result[0] { result.append(parsed) }
            }
        }
        return result
    }
}
