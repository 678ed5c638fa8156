import AccessoryTransport
import COpenSSL

/// The one public error type of AccessoryTLS: a stable ``Code`` for programs and a readable
/// message that says what was wrong and what to do about it.
public struct TLSError: AccessoryError, Equatable {
    /// A stable, machine-readable identifier. New codes may be added; existing ones never change.
    public struct Code: AccessoryErrorCode {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The configuration is unusable: a file is missing or unreadable, a key does not match
        /// its certificate, a pin cannot be parsed, a PKCS#12 password is wrong.
        public static let invalidConfiguration = Code(rawValue: "tls-invalid-configuration")
        /// The peer's certificate is not trusted: unknown issuer, self-signed and not pinned or
        /// paired, expired, not yet valid, or rejected by the app's trust callback.
        public static let untrustedCertificate = Code(rawValue: "tls-untrusted-certificate")
        /// The certificate does not name the expected identity (SAN or CN).
        public static let nameMismatch = Code(rawValue: "tls-name-mismatch")
        /// The certificate's key does not match the configured pins.
        public static let pinMismatch = Code(rawValue: "tls-pin-mismatch")
        /// The accessory is paired (known_accessories) with another key: it changed, or someone
        /// is in the middle. Fails closed.
        public static let pairingMismatch = Code(rawValue: "tls-pairing-mismatch")
        /// There was nothing to check the peer's identity against (no name, pin or pairing).
        public static let noIdentity = Code(rawValue: "tls-no-identity")
        /// The TLS handshake failed for another reason (protocol version, ciphers, the peer
        /// required a client certificate, the peer rejected ours, …).
        public static let handshakeFailed = Code(rawValue: "tls-handshake-failed")
        /// The link closed before the handshake finished.
        public static let closedDuringHandshake = Code(rawValue: "tls-closed-during-handshake")
        /// The handshake did not finish in time.
        public static let handshakeTimeout = Code(rawValue: "tls-handshake-timeout")
        /// The peer closed the byte stream without a TLS close_notify: anything after the last
        /// complete message may have been cut off by an attacker or a broken link.
        public static let truncated = Code(rawValue: "tls-truncated")
        /// A TLS record could not be processed after the handshake (bad MAC, protocol error).
        public static let protocolError = Code(rawValue: "tls-protocol-error")
        /// The accessory requires a client certificate and none was presented (or this server
        /// requires one and the client presented none).
        public static let clientCertificateRequired = Code(rawValue: "tls-client-certificate-required")
        /// The peer rejected the certificate this side presented (unknown CA, bad or expired
        /// certificate, access denied).
        public static let certificateRejectedByPeer = Code(rawValue: "tls-certificate-rejected-by-peer")
        /// The trust store (known_accessories or the anchors directory) could not be read or
        /// written.
        public static let trustStoreError = Code(rawValue: "tls-trust-store")
    }

    public let code: Code
    public let message: String
    /// The error that caused this one, if any.
    public let underlying: (any Error)?

    /// An error with the given code and message.
    ///
    /// - Parameters:
    ///   - code: What went wrong, for programs.
    ///   - message: What went wrong and what to do about it, for people.
    ///   - underlying: The error that caused this one, if any; `nil` by default.
    public init(_ code: Code, _ message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    /// Equal when code and message are (the underlying error is not compared).
    public static func == (lhs: TLSError, rhs: TLSError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message
    }
}

/// Reads and clears OpenSSL's per-thread error queue.
enum OpenSSLErrorQueue {
    /// Every queued error as "reason (library)", oldest first; empties the queue.
    static func drain() -> [String] {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            messages.append(Self.describe(code))
        }
        return messages
    }

    /// Every queued error code, oldest first; empties the queue.
    static func drainCodes() -> [UInt] {
        var codes: [UInt] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            codes.append(code)
        }
        return codes
    }

    /// The queue as one clause, or `fallback` when it is empty.
    static func drainText(or fallback: String) -> String {
        let messages = Self.drain()
        return messages.isEmpty ? fallback : messages.joined(separator: "; ")
    }

    static func describe(_ code: UInt) -> String {
        let reason = ERR_reason_error_string(code).map { String(cString: $0) }
        let library = ERR_lib_error_string(code).map { String(cString: $0) }
        switch (reason, library) {
        case (let reason?, let library?): return "\(reason) (\(library))"
        case (let reason?, nil): return reason
        default: return "OpenSSL error 0x\(String(code, radix: 16))"
        }
    }

    static func clear() { ERR_clear_error() }
}
