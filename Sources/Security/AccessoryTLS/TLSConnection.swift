import AccessoryTransport
import COpenSSL
import NIOCore

/// One TLS connection: an OpenSSL `SSL` with a memory BIO for ciphertext in and one for
/// ciphertext out. Every step maps OpenSSL's WANT_READ/WANT_WRITE to "incomplete".
/// Used only on the channel's event loop.
final class TLSConnection {
    enum Step {
        case complete
        case incomplete
        /// The peer sent close_notify.
        case closed
        case failed(TLSError)
    }

    private let ssl: OpaquePointer
    private let input: OpaquePointer
    private let output: OpaquePointer
    let evaluator: ServerTrustEvaluator?
    let role: TLSConfiguration.Role
    private let serverName: String?
    /// Kept alive as long as the `SSL`: its ALPN callback reads the context's list.
    private let context: TLSContext

    init(context: TLSContext) throws(TLSError) {
        OpenSSLErrorQueue.clear()
        guard let ssl = SSL_new(context.ctx) else {
            throw TLSError(
                .invalidConfiguration,
                "OpenSSL could not create a connection: \(OpenSSLErrorQueue.drainText(or: "out of memory"))"
            )
        }
        guard let input = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw TLSError(.invalidConfiguration, "OpenSSL could not create memory BIOs (out of memory)")
        }
        guard let output = BIO_new(BIO_s_mem()) else {
            BIO_free(input)
            SSL_free(ssl)
            throw TLSError(.invalidConfiguration, "OpenSSL could not create memory BIOs (out of memory)")
        }
        // An empty input BIO means "wait for more", not end of file.
        _ = accessory_BIO_set_mem_eof_return(input, -1)
        SSL_set_bio(ssl, input, output)  // the SSL owns both BIOs now
        self.ssl = ssl
        self.input = input
        self.output = output
        self.role = context.configuration.role
        self.serverName = context.configuration.serverName
        self.context = context
        switch context.configuration.role {
        case .client:
            SSL_set_connect_state(ssl)
            let evaluator = ServerTrustEvaluator(configuration: context.configuration, pairedEntry: context.pairedEntry)
            self.evaluator = evaluator
            // Unretained: `self` keeps the evaluator alive as long as the SSL exists.
            SSL_set_ex_data(ssl, 0, Unmanaged.passUnretained(evaluator).toOpaque())
        case .server:
            SSL_set_accept_state(ssl)
            self.evaluator = nil
        }
        // Every stored property is set: from here on a throw runs deinit, which frees the SSL
        // (and its BIOs). Freeing it here as well was a double free.
        if context.configuration.role == .client, let wire = context.configuration.applicationProtocolsWireFormat,
            SSL_set_alpn_protos(ssl, wire, UInt32(wire.count)) != 0  // 0 is success here
        {
            throw TLSError(
                .invalidConfiguration,
                "OpenSSL refused the ALPN list \(context.configuration.applicationProtocols): \(OpenSSLErrorQueue.drainText(or: "invalid"))"
            )
        }
        if context.configuration.role == .client, let name = context.configuration.serverName,
            !ServerTrustEvaluator.isIPAddress(name),  // no SNI for addresses (RFC 6066)
            accessory_SSL_set_tlsext_host_name(ssl, name) != 1
        {
            throw TLSError(
                .invalidConfiguration,
                "'\(UntrustedText.printable(name))' cannot be sent as a TLS server name: \(OpenSSLErrorQueue.drainText(or: "invalid"))"
            )
        }
    }

    deinit {
        SSL_set_ex_data(self.ssl, 0, nil)
        SSL_free(self.ssl)
    }

    /// Hands ciphertext from the peer to OpenSSL.
    func feed(_ buffer: ByteBuffer) {
        buffer.withUnsafeReadableBytes { bytes in
            var offset = 0
            while offset < bytes.count, let base = bytes.baseAddress {
                let chunk = min(bytes.count - offset, Int(Int32.max))
                let written = BIO_write(self.input, base + offset, Int32(chunk))
                if written <= 0 { break }
                offset += Int(written)
            }
        }
    }

    /// Tells OpenSSL that no more ciphertext will come.
    func markEndOfInput() {
        _ = accessory_BIO_set_mem_eof_return(self.input, 0)
    }

    /// Ciphertext OpenSSL wants sent, or `nil` if none is waiting.
    func takeOutput(allocator: ByteBufferAllocator) -> ByteBuffer? {
        let pending = BIO_ctrl_pending(self.output)
        guard pending > 0 else { return nil }
        var buffer = allocator.buffer(capacity: Int(pending))
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: Int(pending)) { bytes in
            Int(max(0, BIO_read(self.output, bytes.baseAddress, Int32(min(bytes.count, Int(Int32.max))))))
        }
        return buffer
    }

    func handshake() -> Step {
        OpenSSLErrorQueue.clear()
        let result = SSL_do_handshake(self.ssl)
        if result == 1 { return .complete }
        return self.step(for: result, during: "the handshake")
    }

    /// Decrypts what is available into `buffer`.
    func read(into buffer: inout ByteBuffer) -> Step {
        OpenSSLErrorQueue.clear()
        var step = Step.incomplete
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 16 * 1024) { bytes in
            var count = 0
            let result = SSL_read_ex(self.ssl, bytes.baseAddress, bytes.count, &count)
            if result == 1 {
                step = .complete
                return count
            }
            step = self.step(for: result, during: "reading")
            return 0
        }
        return step
    }

    /// Encrypts all of `buffer` (a memory BIO never pushes back).
    func write(_ buffer: ByteBuffer) -> Step {
        var step = Step.complete
        buffer.withUnsafeReadableBytes { bytes in
            var offset = 0
            while offset < bytes.count, let base = bytes.baseAddress {
                OpenSSLErrorQueue.clear()
                var written = 0
                let result = SSL_write_ex(self.ssl, base + offset, bytes.count - offset, &written)
                if result != 1 {
                    step = self.step(for: result, during: "writing")
                    if case .incomplete = step {
                        step = .failed(
                            TLSError(
                                .protocolError,
                                "OpenSSL could not encrypt the data (it asked to wait while writing to memory)"
                            )
                        )
                    }
                    return
                }
                offset += written
            }
        }
        return step
    }

    /// Sends close_notify; `.complete` once the peer's close_notify has also been seen.
    func shutdown() -> Step {
        OpenSSLErrorQueue.clear()
        let result = SSL_shutdown(self.ssl)
        if result == 1 { return .complete }
        if result == 0 { return .incomplete }
        let error = SSL_get_error(self.ssl, result)
        if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE { return .incomplete }
        _ = OpenSSLErrorQueue.drain()
        return .complete
    }

    /// Whether the peer's close_notify has arrived.
    var receivedCloseNotify: Bool { (SSL_get_shutdown(self.ssl) & SSL_RECEIVED_SHUTDOWN) != 0 }

    func sessionInfo() -> TLSSessionInfo {
        let version = SSL_get_version(self.ssl).map { String(cString: $0) } ?? "unknown"
        let cipher =
            SSL_get_current_cipher(self.ssl).flatMap { SSL_CIPHER_get_name($0) }.map { String(cString: $0) }
            ?? "unknown"
        var certificates: [TLSCertificate] = []
        if let chain = SSL_get_peer_cert_chain(self.ssl) {
            for index in 0..<accessory_sk_X509_num(chain) {
                if let cert = accessory_sk_X509_value(chain, index), let parsed = TLSCertificate(x509: cert) {
                    certificates.append(parsed)
                }
            }
        }
        if self.role == .server, let peer = SSL_get1_peer_certificate(self.ssl) {
            // On a server the chain excludes the leaf.
            defer { X509_free(peer) }
            if let parsed = TLSCertificate(x509: peer) { certificates.insert(parsed, at: 0) }
        }
        var selected: UnsafePointer<UInt8>? = nil
        var selectedLength: UInt32 = 0
        SSL_get0_alpn_selected(self.ssl, &selected, &selectedLength)
        let applicationProtocol = selected.map {
            String(decoding: UnsafeBufferPointer(start: $0, count: Int(selectedLength)), as: UTF8.self)
        }
        return TLSSessionInfo(
            protocolVersion: version,
            cipher: cipher,
            peerCertificates: certificates,
            applicationProtocol: selectedLength > 0 ? applicationProtocol : nil,
            firstUsePairing: self.evaluator?.pinToRemember
        )
    }

    private func step(for result: Int32, during action: String) -> Step {
        let error = SSL_get_error(self.ssl, result)
        switch error {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return .incomplete
        case SSL_ERROR_ZERO_RETURN:
            return .closed
        default:
            if let rejection = self.evaluator?.rejection {
                _ = OpenSSLErrorQueue.drain()
                return .failed(rejection)
            }
            return .failed(self.describe(error: error, during: action))
        }
    }

    /// Turns OpenSSL's error queue into a message that says what happened in words,
    /// classified by OpenSSL's reason codes (never by the text of its messages).
    private func describe(error: Int32, during action: String) -> TLSError {
        var reasons: Set<Int32> = []
        var texts: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            if accessory_ERR_GET_LIB(code) == ERR_LIB_SSL { reasons.insert(accessory_ERR_GET_REASON(code)) }
            texts.append(OpenSSLErrorQueue.describe(code))
        }
        let detail =
            texts.isEmpty
            ? (error == SSL_ERROR_SYSCALL ? "the link ended" : "OpenSSL error \(error)")
            : texts.joined(separator: "; ")
        let peer = self.role == .client ? "accessory" : "client"
        let handshake = action == "the handshake"
        if reasons.contains(SSL_R_UNEXPECTED_EOF_WHILE_READING) {
            return TLSError(
                handshake ? .closedDuringHandshake : .truncated,
                "the \(peer) closed the link without a TLS close_notify during \(action) (\(detail)); data may have been cut off"
            )
        }
        if !reasons.isDisjoint(with: Self.noSharedVersion) {
            return TLSError(
                .handshakeFailed,
                "the \(peer) and this side share no TLS version (this side requires at least the configured minimum, TLS 1.2 by default): \(detail)"
            )
        }
        let certificateRequestedButNoneGiven =
            self.evaluator?.certificateRequested == true
            && reasons.contains(SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE)
        if !reasons.isDisjoint(with: Self.clientCertificateMissing) || certificateRequestedButNoneGiven {
            if self.role == .server {
                return TLSError(
                    .clientCertificateRequired,
                    "the client presented no certificate, and this side requires one (--client-ca): \(detail)"
                )
            }
            return TLSError(
                .clientCertificateRequired,
                "the \(peer) requires a client certificate and none was presented; give one with --cert/--key (or a PKCS#12 file): \(detail)"
            )
        }
        if !reasons.isDisjoint(with: Self.ourCertificateRejected) {
            return TLSError(.certificateRejectedByPeer, "the \(peer) rejected this side's certificate: \(detail)")
        }
        if !reasons.isDisjoint(with: Self.noSharedAlgorithm) {
            return TLSError(
                .handshakeFailed,
                "the \(peer) and this side share no cipher suite or signature algorithm (this side offers TLS 1.3, and on TLS 1.2 only ECDHE with AES-GCM or ChaCha20-Poly1305; see docs/tls.md): \(detail)"
            )
        }
        if handshake {
            return TLSError(.handshakeFailed, "the TLS handshake with the \(peer) failed: \(detail)")
        }
        return TLSError(.protocolError, "TLS failed while \(action): \(detail)")
    }

    private static let noSharedVersion: Set<Int32> = [
        SSL_R_UNSUPPORTED_PROTOCOL, SSL_R_NO_PROTOCOLS_AVAILABLE, SSL_R_TLSV1_ALERT_PROTOCOL_VERSION,
        SSL_R_VERSION_TOO_LOW, SSL_R_WRONG_SSL_VERSION,
    ]
    private static let clientCertificateMissing: Set<Int32> = [
        SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED, SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE,
    ]
    private static let ourCertificateRejected: Set<Int32> = [
        SSL_R_TLSV1_ALERT_UNKNOWN_CA, SSL_R_SSLV3_ALERT_BAD_CERTIFICATE, SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN,
        SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE, SSL_R_TLSV1_ALERT_ACCESS_DENIED,
    ]
    private static let noSharedAlgorithm: Set<Int32> = [
        SSL_R_NO_SHARED_CIPHER, SSL_R_NO_CIPHERS_AVAILABLE, SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE,
        SSL_R_NO_SHARED_SIGNATURE_ALGORITHMS, SSL_R_NO_SUITABLE_SIGNATURE_ALGORITHM,
        SSL_R_TLSV1_ALERT_INSUFFICIENT_SECURITY,
    ]
}
