import AccessoryTLS
import AccessoryTransport
import ArgumentParser

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

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
        help: ArgumentHelp(
            "Password of the PKCS#12 file or of the encrypted PEM key. Visible to other users in the process list: prefer --cert-password-file or $ACCESSORY_HTTP_CERT_PASSWORD.",
            valueName: "password"
        )
    )
    var certPassword: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Read the --cert password from the first line of this file (not shown in the process list).",
            valueName: "file"
        )
    )
    var certPasswordFile: String?

    /// The environment variable read for the certificate password when neither
    /// `--cert-password` nor `--cert-password-file` is given.
    static let passwordEnvironmentVariable = "ACCESSORY_HTTP_CERT_PASSWORD"

    func validate() throws {
        if self.certPassword != nil && self.certPasswordFile != nil {
            throw ValidationError(
                "give the certificate password once: --cert-password or --cert-password-file, not both"
            )
        }
    }

    /// The password of the PKCS#12 file or encrypted PEM key: `--cert-password`, then the first
    /// line of `--cert-password-file` (its line ending stripped), then
    /// `$ACCESSORY_HTTP_CERT_PASSWORD`; `nil` when none is given.
    func resolvedCertPassword(environment: [String: String]) throws(CLIError) -> String? {
        if let password = self.certPassword { return password }
        if let path = self.certPasswordFile { return try Self.firstLine(ofPasswordFile: path) }
        return environment[Self.passwordEnvironmentVariable]
    }

    private static func firstLine(ofPasswordFile path: String) throws(CLIError) -> String {
        guard let file = fopen(path, "r") else {
            throw CLIError(
                .file,
                "--cert-password-file \(path): cannot read it (\(String(cString: strerror(errno)))); give a readable file whose first line is the password"
            )
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        // A password is one line; never read an unbounded file (a device node, a FIFO left open).
        while bytes.count <= 64 * 1024 {
            let count = fread(&chunk, 1, chunk.count, file)
            if count <= 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
            if chunk[0..<count].contains(UInt8(ascii: "\n")) { break }
        }
        if ferror(file) != 0 {
            throw CLIError(
                .file,
                "--cert-password-file \(path): cannot read it; give a readable file whose first line is the password"
            )
        }
        var line = bytes.prefix { $0 != UInt8(ascii: "\n") }
        if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
        return String(decoding: line, as: UTF8.self)
    }

    /// This process's environment, for ``resolvedCertPassword(environment:)``.
    static var processEnvironment: [String: String] {
        var environment: [String: String] = [:]
        if let value = getenv(Self.passwordEnvironmentVariable) {
            environment[Self.passwordEnvironmentVariable] = String(cString: value)
        }
        return environment
    }

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
            let password = try self.resolvedCertPassword(environment: Self.processEnvironment)
            return .pkcs12(file: cert, password: password ?? "")
        }
        guard let key = self.key else {
            throw CLIError(.usage, "--cert \(cert) needs --key FILE (or give a PKCS#12 .p12 file)")
        }
        return .pem(
            certificateFile: cert,
            keyFile: key,
            keyPassword: try self.resolvedCertPassword(environment: Self.processEnvironment)
        )
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
        // ALPN says which HTTP the link speaks (an HTTP/2 link speaks it whatever the answer:
        // prior knowledge).
        configuration.applicationProtocols = spec.link.http == .http2 ? ["h2"] : ["http/1.1"]
        return configuration
    }

    /// Wraps a client transport in TLS when a TLS option was given.
    func wrapClient(_ transport: any ByteStreamTransport, spec: DeviceSpec) throws(CLIError) -> any ByteStreamTransport
    {
        guard self.isEnabled else { return transport }
        if case .emulator = spec.kind {
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
        var configuration = TLSConfiguration.server(
            identity: identity,
            clientAuthentication: self.clientCA.isEmpty ? .none : .required(trustedCAFiles: self.clientCA),
            minimumVersion: try self.minimumVersion()
        )
        // The responder speaks both, and tells them apart by their first bytes.
        configuration.applicationProtocols = ["h2", "http/1.1"]
        return configuration
    }
}
