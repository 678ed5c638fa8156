import AccessoryTransport
import COpenSSL

/// An OpenSSL `SSL_CTX` configured from a ``TLSConfiguration``, plus the trust snapshot the
/// client's verification uses.
///
/// Sendability: the context is fully configured in `init` and never mutated afterwards; the
/// only later use of `ctx` is `SSL_new`, which OpenSSL documents as safe to call concurrently
/// on a shared, no longer modified `SSL_CTX` (reference counts are atomic). `deinit` frees it
/// once no Swift reference remains, and each `SSL` holds its own reference to the `SSL_CTX`.
final class TLSContext: @unchecked Sendable {
    let ctx: OpaquePointer
    let configuration: TLSConfiguration
    /// The pinned key of the paired accessory, read from the trust store at open.
    let pairedEntry: TrustStore.Entry?
    /// The server's ALPN list as its selection callback reads it; freed after the context.
    private var alpnList: UnsafeMutableRawPointer?

    init(configuration: TLSConfiguration) throws(TLSError) {
        OpenSSLErrorQueue.clear()
        let method = configuration.role == .client ? TLS_client_method() : TLS_server_method()
        guard let ctx = SSL_CTX_new(method) else {
            throw TLSError(
                .invalidConfiguration,
                "OpenSSL could not create a TLS context: \(OpenSSLErrorQueue.drainText(or: "out of memory"))"
            )
        }
        self.ctx = ctx
        self.configuration = configuration
        // If anything below throws, deinit does not run for a partly initialised class, so free here.
        do {
            self.pairedEntry = try Self.configure(ctx, configuration)
        } catch {
            SSL_CTX_free(ctx)
            throw error
        }
        if configuration.role == .server, let wire = configuration.applicationProtocolsWireFormat {
            self.alpnList = accessory_SSL_CTX_set_alpn_server(ctx, wire, UInt32(wire.count))
        }
    }

    deinit {
        SSL_CTX_free(self.ctx)
        // After the context: a connection still using it holds its own reference, and may
        // still ask the callback; the last `SSL` is freed before the last TLSContext reference
        // goes (each TLSConnection keeps its context's owner alive through TLSHandler).
        accessory_alpn_free(self.alpnList)
    }

    private static func configure(_ ctx: OpaquePointer, _ configuration: TLSConfiguration) throws(TLSError)
        -> TrustStore.Entry?
    {
        if let maximum = configuration.maximumVersion, maximum.openSSLValue < configuration.minimumVersion.openSSLValue
        {
            throw TLSError(
                .invalidConfiguration,
                "the maximum TLS version (\(maximum)) is below the minimum (\(configuration.minimumVersion))"
            )
        }
        guard accessory_SSL_CTX_set_min_proto_version(ctx, configuration.minimumVersion.openSSLValue) == 1,
            accessory_SSL_CTX_set_max_proto_version(ctx, configuration.maximumVersion?.openSSLValue ?? 0) == 1
        else {
            throw TLSError(
                .invalidConfiguration,
                "OpenSSL refused the TLS version range: \(OpenSSLErrorQueue.drainText(or: "unsupported"))"
            )
        }
        try Self.configureAlgorithms(
            ctx,
            legacy: configuration.minimumVersion.openSSLValue < TLSVersion.v1_2.openSSLValue
        )
        // No renegotiation, no compression; SSL_OP_IGNORE_UNEXPECTED_EOF stays OFF so that a
        // missing close_notify is reported (see TLSHandler).
        SSL_CTX_set_options(ctx, accessory_SSL_OP_NO_RENEGOTIATION() | accessory_SSL_OP_NO_COMPRESSION())
        SSL_CTX_clear_options(ctx, accessory_SSL_OP_IGNORE_UNEXPECTED_EOF())

        if let identity = configuration.identity {
            try Self.load(identity, into: ctx)
        } else if configuration.role == .server {
            throw TLSError(.invalidConfiguration, "a TLS server needs a certificate and key (--cert/--key)")
        }

        switch configuration.role {
        case .client:
            return try Self.configureClientTrust(ctx, configuration)
        case .server:
            try Self.configureClientAuthentication(ctx, configuration.clientAuthentication)
            let sessionContext = Array("accessory-http".utf8)
            _ = SSL_CTX_set_session_id_context(ctx, sessionContext, UInt32(sessionContext.count))
            return nil
        }
    }

    /// TLS 1.2 cipher suites: ECDHE key exchange with an AEAD cipher only (Mozilla's
    /// "intermediate" list less its DHE suites). TLS 1.3's suites are all AEAD and stay
    /// OpenSSL's default.
    static let modernCipherList =
        "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
    /// What TLS 1.0 and 1.1 need in addition (they have no AEAD suites): ECDHE with AES-CBC.
    static let legacyCipherList =
        "ECDHE-ECDSA-AES128-SHA:ECDHE-RSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA:ECDHE-RSA-AES256-SHA"
    /// TLS 1.2 handshake signatures when the security level had to be lowered for TLS 1.0/1.1:
    /// SHA-256 and better only, as security level 2 would require.
    static let modernSignatureAlgorithms =
        "ECDSA+SHA256:ECDSA+SHA384:ECDSA+SHA512:ed25519:ed448:rsa_pss_pss_sha256:rsa_pss_pss_sha384:rsa_pss_pss_sha512:rsa_pss_rsae_sha256:rsa_pss_rsae_sha384:rsa_pss_rsae_sha512:RSA+SHA256:RSA+SHA384:RSA+SHA512"

    /// Cipher suites, and what a lowered minimum version changes. TLS 1.0/1.1 sign their
    /// handshakes with SHA-1/MD5, which OpenSSL 3 allows only at security level 0, and that
    /// level is per context. So a lowered minimum gets level 0 — and only what the old
    /// versions need comes with it: four ECDHE CBC suites, while TLS 1.2 keeps SHA-256+
    /// handshake signatures and the peer's certificates are still checked at level 2
    /// (ServerTrustEvaluator). Static RSA, 3DES, RC4 and CBC-SHA1 without ECDHE stay off.
    private static func configureAlgorithms(_ ctx: OpaquePointer, legacy: Bool) throws(TLSError) {
        let ciphers = legacy ? Self.modernCipherList + ":" + Self.legacyCipherList : Self.modernCipherList
        guard SSL_CTX_set_cipher_list(ctx, ciphers) == 1 else {
            throw TLSError(
                .invalidConfiguration,
                "the system OpenSSL refused the cipher list: \(OpenSSLErrorQueue.drainText(or: "unsupported"))"
            )
        }
        guard legacy else { return }
        SSL_CTX_set_security_level(ctx, 0)
        guard accessory_SSL_CTX_set1_sigalgs_list(ctx, Self.modernSignatureAlgorithms) == 1 else {
            throw TLSError(
                .invalidConfiguration,
                "the system OpenSSL refused the signature algorithms: \(OpenSSLErrorQueue.drainText(or: "unsupported"))"
            )
        }
    }

    /// The expected name must be something a certificate can carry and SNI can send: not
    /// empty, at most 253 bytes (a DNS name's limit), no spaces or control characters.
    static func validate(serverName name: String) throws(TLSError) {
        let printable = UntrustedText.printable(name)
        guard !name.isEmpty else {
            throw TLSError(
                .invalidConfiguration,
                "the expected TLS name is empty; give the name the accessory's certificate carries (--tls-name NAME), or leave it out and use a pin or pairing"
            )
        }
        guard name.utf8.count <= 253 else {
            throw TLSError(
                .invalidConfiguration,
                "the expected TLS name is \(name.utf8.count) bytes long; a DNS name has at most 253 (--tls-name takes the name in the accessory's certificate)"
            )
        }
        guard
            !name.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F })
        else {
            throw TLSError(
                .invalidConfiguration,
                "the expected TLS name '\(printable)' holds spaces or control characters; give the DNS name or IP address the accessory's certificate carries"
            )
        }
    }

    private static func configureClientTrust(_ ctx: OpaquePointer, _ configuration: TLSConfiguration) throws(TLSError)
        -> TrustStore.Entry?
    {
        let trust = configuration.trust
        if let name = configuration.serverName { try Self.validate(serverName: name) }
        if trust.useSystemRoots {
            if SSL_CTX_set_default_verify_paths(ctx) != 1 {
                throw TLSError(
                    .invalidConfiguration,
                    "cannot load the system root certificates: \(OpenSSLErrorQueue.drainText(or: "unknown"))"
                )
            }
        }
        var anchors = trust.anchorFiles
        if let store = trust.trustStore { anchors += try store.anchorFiles() }
        for file in anchors {
            OpenSSLErrorQueue.clear()
            if SSL_CTX_load_verify_locations(ctx, file, nil) != 1 {
                throw TLSError(
                    .invalidConfiguration,
                    "cannot load trusted certificates from \(file): \(OpenSSLErrorQueue.drainText(or: "unreadable"))"
                )
            }
        }
        var paired: TrustStore.Entry?
        if let pairing = trust.pairing {
            try TrustStore.validate(identity: pairing.identity)
            paired = try Self.pairingStore(of: trust).entry(for: pairing.identity)
        }
        // Verification happens in our callback (ServerTrustEvaluator), which runs OpenSSL's
        // own chain verification and then applies pins, pairing and the app's decision.
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        SSL_CTX_set_cert_verify_callback(ctx, certificateVerifyCallback, nil)
        if configuration.identity == nil {
            // Called only when the accessory asks for a certificate and none is set: noted so
            // that TLS 1.2's bare handshake_failure alert can be explained (TLSConnection).
            SSL_CTX_set_client_cert_cb(ctx, clientCertificateRequestedCallback)
        }
        return paired
    }

    /// The store a pairing reads and, on first use, writes: the configured one. Without one
    /// (`trustStore: nil`, "use none") pairing cannot keep its promise, so it is refused rather
    /// than quietly reading and writing the user's standard store behind the caller's back.
    static func pairingStore(of trust: TLSTrust) throws(TLSError) -> TrustStore {
        guard let store = trust.trustStore else {
            throw TLSError(
                .invalidConfiguration,
                "pairing with '\(trust.pairing?.identity ?? "")' needs a trust store to keep the accessory's key in, "
                    + "and TLSTrust.trustStore is nil: give it a TrustStore (TrustStore.standard() is the command's)"
            )
        }
        return store
    }

    private static func configureClientAuthentication(_ ctx: OpaquePointer, _ authentication: TLSClientAuthentication)
        throws(TLSError)
    {
        let files: [String]
        let mode: Int32
        switch authentication {
        case .none:
            SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nil)
            return
        case .required(let trusted):
            (files, mode) = (trusted, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT)
        case .optional(let trusted):
            (files, mode) = (trusted, SSL_VERIFY_PEER)
        }
        guard !files.isEmpty else {
            throw TLSError(
                .invalidConfiguration,
                "client certificates are requested but no CA file to verify them was given"
            )
        }
        guard let names = accessory_sk_X509_NAME_new_null() else {
            throw TLSError(.invalidConfiguration, "out of memory")
        }
        for file in files {
            OpenSSLErrorQueue.clear()
            guard SSL_CTX_load_verify_locations(ctx, file, nil) == 1,
                SSL_add_file_cert_subjects_to_stack(names, file) == 1
            else {
                accessory_sk_X509_NAME_pop_free(names)
                throw TLSError(
                    .invalidConfiguration,
                    "cannot load client CA certificates from \(file): \(OpenSSLErrorQueue.drainText(or: "unreadable"))"
                )
            }
        }
        SSL_CTX_set_client_CA_list(ctx, names)  // takes ownership
        SSL_CTX_set_verify(ctx, mode, nil)
    }

    private static func load(_ identity: TLSIdentity, into ctx: OpaquePointer) throws(TLSError) {
        OpenSSLErrorQueue.clear()
        switch identity {
        case .pem(let certificateFile, let keyFile, let password):
            guard SSL_CTX_use_certificate_chain_file(ctx, certificateFile) == 1 else {
                throw TLSError(
                    .invalidConfiguration,
                    "cannot load the certificate \(certificateFile): \(OpenSSLErrorQueue.drainText(or: "unreadable"))"
                )
            }
            let loaded: Int32
            if let password {
                loaded = password.withCString { pointer in
                    SSL_CTX_set_default_passwd_cb_userdata(ctx, UnsafeMutableRawPointer(mutating: pointer))
                    defer { SSL_CTX_set_default_passwd_cb_userdata(ctx, nil) }
                    return SSL_CTX_use_PrivateKey_file(ctx, keyFile, SSL_FILETYPE_PEM)
                }
            } else {
                // Never prompt on the terminal for a passphrase.
                SSL_CTX_set_default_passwd_cb(ctx) { _, _, _, _ in 0 }
                loaded = SSL_CTX_use_PrivateKey_file(ctx, keyFile, SSL_FILETYPE_PEM)
            }
            guard loaded == 1 else {
                throw TLSError(
                    .invalidConfiguration,
                    "cannot load the private key \(keyFile)\(password == nil ? " (if it is encrypted, give its password)" : ""): \(OpenSSLErrorQueue.drainText(or: "unreadable"))"
                )
            }
        case .pkcs12(let file, let password):
            guard let bio = BIO_new_file(file, "rb") else {
                throw TLSError(
                    .invalidConfiguration,
                    "cannot read the PKCS#12 file \(file): \(OpenSSLErrorQueue.drainText(or: "open failed"))"
                )
            }
            defer { BIO_free(bio) }
            guard let p12 = d2i_PKCS12_bio(bio, nil) else {
                throw TLSError(
                    .invalidConfiguration,
                    "\(file) is not a PKCS#12 file: \(OpenSSLErrorQueue.drainText(or: "unreadable"))"
                )
            }
            defer { PKCS12_free(p12) }
            var key: OpaquePointer?
            var certificate: OpaquePointer?
            var chain: OpaquePointer?
            guard PKCS12_parse(p12, password, &key, &certificate, &chain) == 1 else {
                let codes = OpenSSLErrorQueue.drainCodes()
                let detail =
                    codes.isEmpty ? "parse failed" : codes.map(OpenSSLErrorQueue.describe).joined(separator: "; ")
                if codes.contains(where: { accessory_ERR_GET_REASON($0) == accessory_ERR_R_UNSUPPORTED() }) {
                    throw TLSError(
                        .invalidConfiguration,
                        "the PKCS#12 file \(file) is encrypted with a legacy algorithm (RC2 or 3DES) that OpenSSL 3 does not load by default; re-export it with modern encryption: 'openssl pkcs12 -legacy -in \(file) -out identity.pem -nodes' then 'openssl pkcs12 -export -in identity.pem -out new.p12' (and delete identity.pem): \(detail)"
                    )
                }
                throw TLSError(
                    .invalidConfiguration,
                    "cannot open the PKCS#12 file \(file) (wrong password?): \(detail)"
                )
            }
            defer {
                EVP_PKEY_free(key)
                X509_free(certificate)
                if let chain { accessory_sk_X509_pop_free(chain) }
            }
            guard let key, let certificate else {
                throw TLSError(
                    .invalidConfiguration,
                    "the PKCS#12 file \(file) holds no certificate with a private key"
                )
            }
            guard SSL_CTX_use_certificate(ctx, certificate) == 1, SSL_CTX_use_PrivateKey(ctx, key) == 1 else {
                throw TLSError(
                    .invalidConfiguration,
                    "cannot use the identity in \(file): \(OpenSSLErrorQueue.drainText(or: "rejected"))"
                )
            }
            if let chain {
                for index in 0..<accessory_sk_X509_num(chain) {
                    if let extra = accessory_sk_X509_value(chain, index),
                        accessory_SSL_CTX_add1_chain_cert(ctx, extra) != 1
                    {
                        throw TLSError(
                            .invalidConfiguration,
                            "cannot use the intermediate certificates in \(file): \(OpenSSLErrorQueue.drainText(or: "rejected"))"
                        )
                    }
                }
            }
        }
        guard SSL_CTX_check_private_key(ctx) == 1 else {
            throw TLSError(
                .invalidConfiguration,
                "the private key does not match the certificate: \(OpenSSLErrorQueue.drainText(or: "mismatch"))"
            )
        }
    }
}

/// OpenSSL's certificate verification hook for clients: finds the connection's evaluator
/// through the `SSL` object's app data (ex_data index 0) and lets it decide.
private let certificateVerifyCallback: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Int32 = {
    store,
    _ in
    guard let store,
        let ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()),
        let raw = SSL_get_ex_data(OpaquePointer(ssl), 0)
    else {
        return 0
    }
    let evaluator = Unmanaged<ServerTrustEvaluator>.fromOpaque(raw).takeUnretainedValue()
    return evaluator.evaluate(store) ? 1 : 0
}

/// OpenSSL asks a client without a certificate for one: note it on the connection's evaluator
/// and answer "none" (the handshake goes on; the server decides whether that is enough).
private let clientCertificateRequestedCallback:
    @convention(c) (OpaquePointer?, UnsafeMutablePointer<OpaquePointer?>?, UnsafeMutablePointer<OpaquePointer?>?) ->
        Int32 = { ssl, _, _ in
            if let ssl, let raw = SSL_get_ex_data(ssl, 0) {
                Unmanaged<ServerTrustEvaluator>.fromOpaque(raw).takeUnretainedValue().certificateRequested = true
            }
            return 0
        }
