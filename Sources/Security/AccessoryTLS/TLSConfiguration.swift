import NIOCore

/// A TLS protocol version.
public enum TLSVersion: Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// TLS 1.0, 1.1, 1.2 or 1.3, as the case's name says (`v1_2` is TLS 1.2). 1.0 and 1.1 are
    /// obsolete (RFC 8996); a configuration accepts TLS 1.2 and later unless its minimum is lowered.
    case v1_0, v1_1, v1_2, v1_3

    public var description: String {
        switch self {
        case .v1_0: return "TLS 1.0"
        case .v1_1: return "TLS 1.1"
        case .v1_2: return "TLS 1.2"
        case .v1_3: return "TLS 1.3"
        }
    }

    /// Parses "1.2", "tls1.2", "TLSv1.3".
    public init?(parsing text: String) {
        let lowered = text.lowercased().replacingPrefix("tlsv", "").replacingPrefix("tls", "")
        switch lowered {
        case "1", "1.0": self = .v1_0
        case "1.1": self = .v1_1
        case "1.2": self = .v1_2
        case "1.3": self = .v1_3
        default: return nil
        }
    }

    var openSSLValue: Int32 {
        switch self {
        case .v1_0: return 0x0301
        case .v1_1: return 0x0302
        case .v1_2: return 0x0303
        case .v1_3: return 0x0304
        }
    }
}

extension String {
    fileprivate func replacingPrefix(_ prefix: String, _ replacement: String) -> String {
        self.hasPrefix(prefix) ? replacement + self.dropFirst(prefix.count) : self
    }
}

/// A certificate with its private key: the client's identity for mutual TLS, or the server's.
public enum TLSIdentity: Sendable, Hashable {
    /// A PEM certificate file (the leaf first, then any intermediates) and a PEM private key
    /// file; `keyPassword` if the key is encrypted.
    case pem(certificateFile: String, keyFile: String, keyPassword: String? = nil)
    /// A PKCS#12 (`.p12`/`.pfx`) file holding the certificate, its key and any intermediates.
    case pkcs12(file: String, password: String)
}

/// How a client decides whether to trust the certificate chain an accessory presents.
///
/// The decision, in order (see docs/tls.md):
/// 1. ``insecureSkipVerification``: everything is accepted (the CLI prints a loud warning).
/// 2. If an expected name is configured (``TLSConfiguration/serverName``), the leaf must
///    carry it in its SAN (or CN when it has no SAN). Never skipped when a name is set, and no
///    ``evaluator`` can clear a mismatch.
/// 3. If ``pins`` is not empty, a pin must match the leaf (its key or the whole certificate),
///    or name a CA that the leaf's chain verifiably leads to: a CA OpenSSL verified the chain
///    to, or a CA the accessory sent that the chain verifies to as the *only* anchor. A pin
///    matching some other certificate the peer merely listed counts for nothing (anyone can
///    append a public certificate to their own chain). With a pin, the chain need not lead to
///    a trusted root, and dates are not checked (an accessory's clock and certificate
///    lifetimes are often meaningless). A mismatch fails.
/// 4. Else, if ``pairing`` is set and the trust store knows that accessory, its key must
///    match the remembered one (fails closed, showing both fingerprints; no ``evaluator``
///    can clear it). An unknown accessory is remembered on first use only with
///    ``Pairing/Mode/trustOnFirstUse``.
/// 5. Else the chain must verify against the system roots, ``anchorFiles`` and the trust
///    store's anchors, *and* a name must have been configured: a valid chain alone proves
///    nothing about which accessory answered.
/// 6. Last, ``evaluator`` (if any) sees the chain and the verdict, and may override it,
///    except a name mismatch or a pairing mismatch, which are final.
public struct TLSTrust: Sendable {
    /// Trust the system's root certificates (`SSL_CTX_set_default_verify_paths`).
    public var useSystemRoots: Bool
    /// Extra PEM files of trusted anchors (`--cacert`).
    public var anchorFiles: [String]
    /// Where remembered anchors and paired accessories live; `nil` to use none (then a
    /// ``pairing`` is refused as a configuration error).
    public var trustStore: TrustStore?
    /// Pins: the leaf's key or certificate, or a CA the leaf's chain verifiably leads to,
    /// must match one of them (see rule 3 above).
    public var pins: [TLSPin]
    /// Trust on first use, keyed by an accessory identity (see ``TrustStore``).
    public var pairing: Pairing?
    /// The app's own decision, made after the built-in one (see ``TLSServerTrustEvaluator``).
    public var evaluator: TLSServerTrustEvaluator?
    /// Accept any certificate. Only for debugging: anyone on the link can read and change
    /// the traffic.
    public var insecureSkipVerification: Bool

    /// A trust policy. The defaults trust the system roots and the standard trust store's anchors,
    /// with no pins, no pairing, no evaluator, and verification on.
    ///
    /// - Parameters:
    ///   - useSystemRoots: Whether to trust the system's root certificates; `true` by default.
    ///   - anchorFiles: Extra PEM files of trusted anchors; none by default.
    ///   - trustStore: Where remembered anchors and paired accessories live;
    ///     ``TrustStore/standard()`` by default. `nil` uses none: no store's anchors, and a
    ///     `pairing` is refused (``TLSError/Code/invalidConfiguration``), since it has nowhere to
    ///     keep the accessory's key.
    ///   - pins: Pins the leaf, or a CA its chain verifiably leads to, must match; none by default.
    ///   - pairing: The accessory to pair with, by identity; `nil` (no pairing) by default.
    ///   - evaluator: The app's own decision, made after the built-in one; `nil` by default.
    ///   - insecureSkipVerification: Whether to accept any certificate (debugging only); `false`
    ///     by default.
    public init(
        useSystemRoots: Bool = true,
        anchorFiles: [String] = [],
        trustStore: TrustStore? = .standard(),
        pins: [TLSPin] = [],
        pairing: Pairing? = nil,
        evaluator: TLSServerTrustEvaluator? = nil,
        insecureSkipVerification: Bool = false
    ) {
        self.useSystemRoots = useSystemRoots
        self.anchorFiles = anchorFiles
        self.trustStore = trustStore
        self.pins = pins
        self.pairing = pairing
        self.evaluator = evaluator
        self.insecureSkipVerification = insecureSkipVerification
    }

    /// Pairing with one accessory, like ssh's known_hosts.
    public struct Pairing: Sendable, Hashable {
        /// What happens when the trust store does not know the accessory yet.
        public enum Mode: Sendable, Hashable {
            /// The accessory must already be in the trust store (paired with
            /// `accessory-http trust`), unless its chain verifies and a name is configured.
            case requirePaired
            /// An accessory the trust store does not know is accepted and remembered (its SPKI
            /// pin written to known_accessories); later connections must present that key.
            case trustOnFirstUse
        }

        /// The accessory's identity in known_accessories: the expected name, a serial number,
        /// or the device spec. No whitespace.
        public var identity: String
        /// Whether an accessory the trust store does not know is refused or remembered on first use.
        public var mode: Mode

        /// Pairing with the accessory known as `identity`.
        ///
        /// - Parameters:
        ///   - identity: The accessory's identity in known_accessories: the expected name, a serial
        ///     number, or the device spec. Non-empty, without whitespace, not starting with `#`.
        ///   - mode: What to do with an accessory the trust store does not know;
        ///     ``TLSTrust/Pairing/Mode/requirePaired`` by default.
        public init(identity: String, mode: Mode = .requirePaired) {
            self.identity = identity
            self.mode = mode
        }
    }
}

/// Which client certificates a server asks for.
public enum TLSClientAuthentication: Sendable, Hashable {
    /// No client certificate is requested.
    case none
    /// A client certificate issued by one of the CAs in these PEM files is required;
    /// connections without one are refused.
    case required(trustedCAFiles: [String])
    /// A client certificate is requested and verified if sent, but not required.
    case optional(trustedCAFiles: [String])
}

/// Everything a ``TLSTransport`` needs for one side of a connection.
public struct TLSConfiguration: Sendable {
    /// Which end of the handshake this side is: the client starts it and judges the peer's
    /// certificate with ``TLSConfiguration/trust``; the server presents ``TLSConfiguration/identity``
    /// and waits for the client.
    public enum Role: Sendable, Hashable {
        /// Starts the handshake and judges the peer's certificate: usually the host.
        case client
        /// Presents its identity and waits for the client: usually the accessory.
        case server
    }

    /// Whether this side is the TLS client (usually the host) or the server (usually the accessory).
    public var role: Role
    /// The lowest version accepted; TLS 1.2 unless changed.
    public var minimumVersion: TLSVersion
    /// The highest version offered; `nil` for the highest the system OpenSSL supports.
    public var maximumVersion: TLSVersion?
    /// The certificate and key presented: the client identity (mutual TLS) or the server's.
    public var identity: TLSIdentity?
    /// Client: the accessory's expected identity, checked against the certificate's SAN/CN,
    /// and sent as SNI (unless it is an IP address).
    public var serverName: String?
    /// Client: how the accessory's certificate is judged.
    public var trust: TLSTrust
    /// Server: which client certificates are requested.
    public var clientAuthentication: TLSClientAuthentication
    /// Bound on the handshake, from the moment the link is active.
    public var handshakeTimeout: Duration
    /// How long closing waits for the peer's close_notify after sending ours.
    public var shutdownTimeout: Duration
    /// ALPN (RFC 7301). Client: the protocols offered, in order of preference (`["h2"]` for an
    /// HTTP/2 link). Server: the protocols it speaks, in its order of preference; it picks the
    /// first one the client offered, and goes on without ALPN if there is none in common.
    /// Empty (the default): no ALPN. Names are 1 to 255 bytes.
    public var applicationProtocols: [String] = []

    /// ALPN's wire format: each name prefixed with its length.
    var applicationProtocolsWireFormat: [UInt8]? {
        let names = self.applicationProtocols.map { Array($0.utf8) }.filter { (1...255).contains($0.count) }
        guard !names.isEmpty else { return nil }
        return names.flatMap { [UInt8($0.count)] + $0 }
    }

    /// A client configuration.
    public static func client(
        serverName: String? = nil,
        trust: TLSTrust = TLSTrust(),
        identity: TLSIdentity? = nil,
        minimumVersion: TLSVersion = .v1_2
    ) -> TLSConfiguration {
        TLSConfiguration(
            role: .client,
            minimumVersion: minimumVersion,
            identity: identity,
            serverName: serverName,
            trust: trust
        )
    }

    /// A server configuration: the certificate and key to serve with.
    public static func server(
        identity: TLSIdentity,
        clientAuthentication: TLSClientAuthentication = .none,
        minimumVersion: TLSVersion = .v1_2
    ) -> TLSConfiguration {
        TLSConfiguration(
            role: .server,
            minimumVersion: minimumVersion,
            identity: identity,
            clientAuthentication: clientAuthentication
        )
    }

    /// A configuration for either side; ``client(serverName:trust:identity:minimumVersion:)`` and
    /// ``server(identity:clientAuthentication:minimumVersion:)`` are shorter.
    ///
    /// - Parameters:
    ///   - role: Whether this side is the TLS client or the server.
    ///   - minimumVersion: The lowest version accepted; TLS 1.2 by default.
    ///   - maximumVersion: The highest version offered; `nil` (the default) for the highest the
    ///     system OpenSSL supports.
    ///   - identity: The certificate and key presented; `nil` by default. A server needs one.
    ///   - serverName: Client: the accessory's expected name, checked against its certificate and
    ///     sent as SNI (unless it is an IP address); `nil` by default.
    ///   - trust: Client: how the accessory's certificate is judged; a ``TLSTrust`` with its
    ///     defaults unless given.
    ///   - clientAuthentication: Server: which client certificates are requested;
    ///     ``TLSClientAuthentication/none`` by default.
    ///   - handshakeTimeout: Bound on the handshake; 10 seconds by default. A client's bound starts
    ///     when the link is active, a server's with the client's first byte.
    ///   - shutdownTimeout: How long closing waits for the peer's close_notify after sending ours;
    ///     500 milliseconds by default.
    public init(
        role: Role,
        minimumVersion: TLSVersion = .v1_2,
        maximumVersion: TLSVersion? = nil,
        identity: TLSIdentity? = nil,
        serverName: String? = nil,
        trust: TLSTrust = TLSTrust(),
        clientAuthentication: TLSClientAuthentication = .none,
        handshakeTimeout: Duration = .seconds(10),
        shutdownTimeout: Duration = .milliseconds(500)
    ) {
        self.role = role
        self.minimumVersion = minimumVersion
        self.maximumVersion = maximumVersion
        self.identity = identity
        self.serverName = serverName
        self.trust = trust
        self.clientAuthentication = clientAuthentication
        self.handshakeTimeout = handshakeTimeout
        self.shutdownTimeout = shutdownTimeout
    }
}

/// What the app's server-trust callback sees.
public struct TLSServerTrust: Sendable {
    /// The chain as the accessory sent it, leaf first (DER with parsed facts).
    public let certificates: [TLSCertificate]
    /// The configured expected name, if any.
    public let expectedName: String?
    /// Whether OpenSSL verified the chain against the configured anchors (system roots,
    /// anchor files, the trust store's anchors) *and*, when ``expectedName`` is set, found that
    /// name in the leaf. `true` therefore means "a trusted CA vouches for this name"; with no
    /// expected name it vouches for no identity at all.
    public let chainVerified: Bool
    /// OpenSSL's reason when it did not.
    public let chainError: String?
    /// The built-in decision (see ``TLSTrust``): `nil` if it accepts, else why it rejects.
    public let defaultRejection: TLSError?
}

extension TLSServerTrust {
    /// Built-in rejections that a ``TLSTrustDecision/trust`` answer does not clear: the leaf
    /// does not carry the expected name, or a paired accessory presented another key.
    public static let finalRejections: Set<TLSError.Code> = [.nameMismatch, .pairingMismatch]
}

/// The app's decision about a server's chain.
public enum TLSTrustDecision: Sendable {
    /// Trust the chain, whatever the built-in policy concluded, except a rejection in
    /// ``TLSServerTrust/finalRejections`` (a wrong name, a changed paired key), which stands.
    case trust
    /// Refuse the chain with this reason; the handshake fails with ``TLSError/Code/untrustedCertificate``.
    case reject(String)
    /// Keep the built-in decision.
    case useDefault
}

/// A server-trust callback: the app sees the chain and decides.
///
/// It runs synchronously on the link's event loop, inside the handshake, before any request
/// byte is sent; it must not block. To decide asynchronously (ask the user), reject, ask,
/// remember the answer (for example with ``TrustStore/remember(identity:pin:comment:)`` or a
/// pin) and reconnect.
public struct TLSServerTrustEvaluator: Sendable {
    /// The callback: given the chain and the built-in verdict, returns the app's decision.
    public let evaluate: @Sendable (TLSServerTrust) -> TLSTrustDecision

    /// Wraps a server-trust callback.
    ///
    /// - Parameter evaluate: Called during each handshake, on the link's event loop, with the chain
    ///   and the built-in verdict; must not block. Not called when
    ///   ``TLSTrust/insecureSkipVerification`` is set.
    public init(_ evaluate: @escaping @Sendable (TLSServerTrust) -> TLSTrustDecision) {
        self.evaluate = evaluate
    }
}

/// Facts about a completed handshake.
public struct TLSSessionInfo: Sendable {
    /// "TLSv1.3", "TLSv1.2".
    public let protocolVersion: String
    /// The negotiated cipher suite's name.
    public let cipher: String
    /// The chain the peer presented, leaf first (empty if it presented none).
    public let peerCertificates: [TLSCertificate]
    /// The protocol ALPN settled on (`"h2"`, `"http/1.1"`), or `nil` without ALPN.
    public var applicationProtocol: String? = nil
    /// A first-use pairing the transport writes to the trust store once the handshake is done.
    var firstUsePairing: (identity: String, certificate: TLSCertificate)?
}
