import AccessoryTLS
import AccessoryTransport
import ArgumentParser

/// HTTPS over the accessory link: the TLS options every subcommand takes (see docs/tls.md).
struct TLSOptions: ParsableArguments {
    @Flag(name: .long, help: "Speak TLS on the link (implied by any other TLS option).")
    var tls = false

    @Option(
        name: .long,
        help: ArgumentHelp("Trust the CA or self-signed certificates in this PEM file (repeatable).", valueName: "file")
    )
    var cacert: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Accept only this key (sha256:BASE64 of the SPKI) or certificate (cert-sha256:…) (repeatable).",
            valueName: "pin"
        )
    )
    var pin: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Certificate: the client identity (requests) or the server's (serve). PEM, or PKCS#12 (.p12/.pfx).",
            valueName: "file"
        )
    )
    var cert: String?

    @Option(name: .long, help: ArgumentHelp("Private key (PEM) for --cert.", valueName: "file"))
    var key: String?

    @Option(
        name: .long,
        help: ArgumentHelp("Password of the PKCS#12 file or of the encrypted PEM key.", valueName: "password")
    )
    var certPassword: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The accessory's expected identity, checked against its certificate's SAN/CN (and sent as SNI).",
            valueName: "name"
        )
    )
    var tlsName: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The name the accessory is paired under in known_accessories (default: --tls-name, else the device spec).",
            valueName: "id"
        )
    )
    var tlsIdentity: String?

    @Option(name: .long, help: ArgumentHelp("Lowest TLS version accepted (default 1.2).", valueName: "version"))
    var tlsMinVersion: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "serve: require client certificates issued by the CAs in this PEM file (repeatable).",
            valueName: "file"
        )
    )
    var clientCA: [String] = []

    @Flag(name: .long, help: "Accept ANY certificate (no verification at all). Debugging only.")
    var insecure = false

    /// Whether the link is to be wrapped in TLS.
    var isEnabled: Bool {
        self.tls || !self.cacert.isEmpty || !self.pin.isEmpty || self.cert != nil || self.key != nil
            || self.tlsName != nil || self.tlsIdentity != nil || self.insecure || !self.clientCA.isEmpty
    }

    func identity() throws(CLIError) -> TLSIdentity? {
        guard let cert = self.cert else {
            if self.key != nil { throw CLIError(.usage, "--key needs --cert") }
            return nil
        }
        let lowered = cert.lowercased()
        if lowered.hasSuffix(".p12") || lowered.hasSuffix(".pfx") {
            if self.key != nil {
                throw CLIError(.usage, "--key is not used with a PKCS#12 file: the key is inside \(cert)")
            }
            return .pkcs12(file: cert, password: self.certPassword ?? "")
        }
        guard let key = self.key else {
            throw CLIError(.usage, "--cert \(cert) needs --key FILE (or give a PKCS#12 .p12 file)")
        }
        return .pem(certificateFile: cert, keyFile: key, keyPassword: self.certPassword)
    }

    func minimumVersion() throws(CLIError) -> TLSVersion {
        guard let text = self.tlsMinVersion else { return .v1_2 }
        guard let version = TLSVersion(parsing: text) else {
            throw CLIError(.usage, "--tls-min-version \(text): expected 1.0, 1.1, 1.2 or 1.3")
        }
        return version
    }

    /// The pairing identity for `spec`.
    func pairingIdentity(for spec: DeviceSpec) -> String {
        if let identity = self.tlsIdentity { return identity }
        if let name = self.tlsName { return name }
        return String("\(spec)".unicodeScalars.map { $0.properties.isWhitespace ? "_" : Character($0) })
    }

    /// The client configuration for `spec`.
    func clientConfiguration(for spec: DeviceSpec) throws(CLIError) -> TLSConfiguration {
        var pins: [TLSPin] = []
        for text in self.pin {
            do {
                pins.append(try TLSPin(parsing: text))
            } catch {
                throw CLIError(.usage, "--pin: \(error.message)")
            }
        }
        var trust = TLSTrust(anchorFiles: self.cacert, pins: pins)
        trust.pairing = .init(identity: self.pairingIdentity(for: spec), mode: .requirePaired)
        if self.insecure {
            trust.insecureSkipVerification = true
            StandardError.write(
                """
                ************************************************************************
                * WARNING: --insecure: the accessory's certificate is NOT verified.    *
                * Anyone on the link can read and change this traffic. Debugging only. *
                ************************************************************************

                """
            )
        }
        var configuration = TLSConfiguration.client(
            serverName: self.tlsName,
            trust: trust,
            identity: try self.identity(),
            minimumVersion: try self.minimumVersion()
        )
        configuration.handshakeTimeout = .seconds(15)
        return configuration
    }

    /// Wraps a client transport in TLS when a TLS option was given.
    func wrapClient(_ transport: any ByteStreamTransport, spec: DeviceSpec) throws(CLIError) -> any ByteStreamTransport
    {
        guard self.isEnabled else { return transport }
        if case .emulator = spec {
            throw CLIError(
                .usage,
                "the in-process emulator does not speak TLS; serve it with 'serve --cert … --key …' on unix:PATH and connect to that"
            )
        }
        return TLSTransport(wrapping: transport, configuration: try self.clientConfiguration(for: spec))
    }

    /// The server configuration for `serve`, or `nil` when no TLS option was given.
    func serverConfiguration() throws(CLIError) -> TLSConfiguration? {
        guard self.isEnabled else { return nil }
        guard let identity = try self.identity() else {
            throw CLIError(.usage, "serving HTTPS needs --cert FILE --key FILE (or --cert FILE.p12)")
        }
        return .server(
            identity: identity,
            clientAuthentication: self.clientCA.isEmpty ? .none : .required(trustedCAFiles: self.clientCA),
            minimumVersion: try self.minimumVersion()
        )
    }
}
