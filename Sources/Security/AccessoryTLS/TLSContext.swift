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
    }

    deinit { SSL_CTX_free(self.ctx) }

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
        if configuration.minimumVersion.openSSLValue < TLSVersion.v1_2.openSSLValue {
            // OpenSSL 3's default security level 1+ disables TLS < 1.2 (SHA-1 signatures). A
            // caller who lowers the minimum asks for the old protocols to actually work.
            SSL_CTX_set_security_level(ctx, 0)
        }
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

    private static func configureClientTrust(_ ctx: OpaquePointer, _ configuration: TLSConfiguration) throws(TLSError)
        -> TrustStore.Entry?
    {
        let trust = configuration.trust
        if trust.useSystemRoots {
            if SSL_CTX_set_default_verify_paths(ctx) != 1 {
                throw TLSError(
                    .invalidConfiguration,
                    "cannot load the system root certificates: \(OpenSSLErrorQueue.drainText(or: "unknown"))"
                )
            }
        }
        var anchors = trust.anchorFiles
        if let store = trust.trustStore { anchors += store.anchorFiles() }
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
            paired = try (trust.trustStore ?? .standard()).entry(for: pairing.identity)
        }
        // Verification happens in our callback (ServerTrustEvaluator), which runs OpenSSL's
        // own chain verification and then applies pins, pairing and the app's decision.
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        SSL_CTX_set_cert_verify_callback(ctx, certificateVerifyCallback, nil)
        return paired
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
                throw TLSError(
                    .invalidConfiguration,
                    "cannot open the PKCS#12 file \(file) (wrong password?): \(OpenSSLErrorQueue.drainText(or: "parse failed"))"
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
