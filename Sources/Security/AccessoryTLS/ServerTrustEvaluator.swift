import AccessoryTransport
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
    /// Set when the accessory asked for a client certificate and this side had none: with
    /// TLS 1.2 the refusal arrives as a bare handshake_failure alert, and this is how the
    /// error can say what it means.
    var certificateRequested = false

    init(configuration: TLSConfiguration, pairedEntry: TrustStore.Entry?) {
        self.configuration = configuration
        self.pairedEntry = pairedEntry
    }

    func evaluate(_ store: OpaquePointer) -> Bool {
        guard let leafX509 = X509_STORE_CTX_get0_cert(store), let leaf = TLSCertificate(x509: leafX509) else {
            self.rejection = TLSError(.untrustedCertificate, "the accessory presented no certificate")
            return false
        }
        let certificates = Self.presentedChain(leaf: leaf, store)
        let trust = self.configuration.trust
        if trust.insecureSkipVerification {
            self.acceptedInsecurely = true
            return true
        }
        let verification = self.verifyChain(store)
        OpenSSLErrorQueue.clear()
        var rejection = self.builtInDecision(
            leaf: leaf,
            leafX509: leafX509,
            verification: verification,
            store: store
        )
        if let evaluator = trust.evaluator {
            let facts = TLSServerTrust(
                certificates: certificates,
                expectedName: self.configuration.serverName,
                chainVerified: verification.verified,
                chainError: verification.error,
                defaultRejection: rejection
            )
            switch evaluator.evaluate(facts) {
            case .trust:
                // A wrong name and a changed paired key are final: no callback clears them
                // (docs/tls.md, "The app's callback").
                if let current = rejection, !TLSServerTrust.finalRejections.contains(current.code) { rejection = nil }
            case .reject(let reason):
                rejection = TLSError(
                    .untrustedCertificate,
                    "the app's trust callback refused the accessory's certificate (\(leaf.subject)): \(UntrustedText.printable(reason))"
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

    /// OpenSSL's verdict on the presented chain against the configured anchors, with the
    /// expected name (if any) in the verification parameters, so a verified chain is also a
    /// chain for that name.
    private struct ChainVerification {
        var verified: Bool
        var error: String?
        /// The chain OpenSSL built, leaf first, anchor last; empty unless `verified`.
        var chain: [TLSCertificate]
        /// The security level keys and signatures on a chain must meet.
        var authenticationLevel: Int32
    }

    private func verifyChain(_ store: OpaquePointer) -> ChainVerification {
        if let parameters = X509_STORE_CTX_get0_param(store) {
            if let name = self.configuration.serverName {
                if Self.isIPAddress(name) {
                    _ = X509_VERIFY_PARAM_set1_ip_asc(parameters, name)
                } else {
                    _ = X509_VERIFY_PARAM_set1_host(parameters, name, 0)
                }
            }
            if self.configuration.minimumVersion.openSSLValue < TLSVersion.v1_2.openSSLValue {
                // The context's security level is 0 so that TLS 1.0/1.1 handshakes work at all
                // (TLSContext); the certificates are still held to level 2 (112-bit keys,
                // no SHA-1 signatures), as they are by default.
                X509_VERIFY_PARAM_set_auth_level(parameters, 2)
            }
        }
        let verified = X509_verify_cert(store) == 1
        let error =
            verified ? nil : String(cString: X509_verify_cert_error_string(Int(X509_STORE_CTX_get_error(store))))
        var chain: [TLSCertificate] = []
        if verified, let built = X509_STORE_CTX_get0_chain(store) {
            for index in 0..<accessory_sk_X509_num(built) {
                if let cert = accessory_sk_X509_value(built, index), let parsed = TLSCertificate(x509: cert) {
                    chain.append(parsed)
                }
            }
        }
        let level = X509_STORE_CTX_get0_param(store).map { X509_VERIFY_PARAM_get_auth_level($0) } ?? 2
        return ChainVerification(verified: verified, error: error, chain: chain, authenticationLevel: level)
    }

    /// Whether a pin accepts this peer. A pin is met by the leaf itself, or by a CA only
    /// through a chain that CA really signed: one OpenSSL verified against the configured
    /// anchors, or one that verifies with the pinned certificate as its only anchor. A
    /// certificate that merely appears in the peer's list proves nothing: it is public, and an
    /// impostor can append it to its own chain (docs/tls.md, "What the pins protect against").
    private func pinsAccept(
        leaf: TLSCertificate,
        leafX509: OpaquePointer,
        verification: ChainVerification,
        store: OpaquePointer
    ) -> Bool {
        let pins = self.configuration.trust.pins
        func pinned(_ certificate: TLSCertificate) -> Bool { pins.contains { $0.matches(certificate) } }
        if pinned(leaf) { return true }
        if verification.verified, verification.chain.dropFirst().contains(where: pinned) { return true }
        guard let untrusted = X509_STORE_CTX_get0_untrusted(store) else { return false }
        for index in 0..<accessory_sk_X509_num(untrusted) {
            guard let candidate = accessory_sk_X509_value(untrusted, index),
                let parsed = TLSCertificate(x509: candidate), parsed != leaf, pinned(parsed)
            else { continue }
            if accessory_X509_verify_with_sole_anchor(
                leafX509,
                untrusted,
                candidate,
                0,
                verification.authenticationLevel
            ) == 1 {
                return true
            }
        }
        return false
    }

    private func builtInDecision(
        leaf: TLSCertificate,
        leafX509: OpaquePointer,
        verification: ChainVerification,
        store: OpaquePointer
    ) -> TLSError? {
        let trust = self.configuration.trust
        let name = self.configuration.serverName
        let described =
            "\(leaf.subject)\(leaf.subjectAlternativeNames.isEmpty ? "" : " (\(leaf.subjectAlternativeNames))")"
        // 1. The expected identity, whenever one is configured.
        if let name, !Self.certificate(leafX509, names: name) {
            return TLSError(
                .nameMismatch,
                "the accessory's certificate is not for '\(name)': it names \(described); check --tls-name, or the accessory's certificate"
            )
        }
        // 2. Pins.
        if !trust.pins.isEmpty {
            if self.pinsAccept(leaf: leaf, leafX509: leafX509, verification: verification, store: store) {
                return nil
            }
            return TLSError(
                .pinMismatch,
                "the accessory's certificate \(described) matches none of the pins: it has key \(leaf.spkiPin) (certificate \(leaf.certificatePin)); expected \(trust.pins.map(\.description).joined(separator: " or ")) (a pin on a CA counts only when the accessory's chain verifies to that CA)"
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
        if verification.verified {
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
            "the accessory's certificate is not trusted: \(verification.error ?? "verification failed") — \(described), key \(leaf.spkiPin). To trust it, \(pairingHint)pin it (--pin \(leaf.spkiPin)) or add its CA (--cacert FILE)"
        )
    }

    /// Checks `name` (a DNS name or an IP address) against the certificate's SAN, or its CN
    /// when it carries no SAN (OpenSSL's default rule).
    static func certificate(_ cert: OpaquePointer, names name: String) -> Bool {
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
    private static func presentedChain(leaf: TLSCertificate, _ store: OpaquePointer) -> [TLSCertificate] {
        var result = [leaf]
        if let untrusted = X509_STORE_CTX_get0_untrusted(store) {
            for index in 0..<accessory_sk_X509_num(untrusted) {
                guard let cert = accessory_sk_X509_value(untrusted, index), let parsed = TLSCertificate(x509: cert)
                else { continue }
                if parsed != leaf { result.append(parsed) }
            }
        }
        return result
    }
}
