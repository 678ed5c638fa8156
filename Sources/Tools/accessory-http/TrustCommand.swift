import AccessoryTLS
import AccessoryTransport
import ArgumentParser
import NIOPosix

#if canImport(Glibc)
    import Glibc
#endif

/// `accessory-http trust`: pair with an accessory's certificate, like ssh's known_hosts.
struct Trust: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pair with an accessory: show its certificate, ask, remember its key.",
        discussion: """
            Connects over TLS without trusting anything, shows the certificate's subject and \
            fingerprints, asks, and writes the key's pin to known_accessories in the user's \
            trust directory ($XDG_CONFIG_HOME/accessory-http/trust). Later requests with --tls \
            to the same accessory accept that key, and fail closed if it changes.
            Non-interactive runs must pass --yes. --list shows the paired accessories.
            """
    )
    @OptionGroup var globals: GlobalOptions

    @Flag(name: .long, help: "Remember without asking (needed when stdin is not a terminal).")
    var yes = false

    @Flag(name: .long, help: "List paired accessories instead.")
    var list = false

    @Option(name: .long, help: ArgumentHelp("Forget the accessory paired under this identity.", valueName: "id"))
    var forget: String?

    func run() async throws {
        let globals = self.globals
        let (yes, list, forget) = (self.yes, self.list, self.forget)
        try await runReportingErrors {
            let store = TrustStore.standard()
            do {
                if list {
                    for entry in try store.entries() {
                        try StandardOutput.write(
                            "\(entry.identity) \(entry.pin)\(entry.comment.map { "  # \($0)" } ?? "")  (\(entry.file))\n"
                        )
                    }
                    return
                }
                if let forget {
                    let removed = try store.forget(identity: forget)
                    StandardError.write(
                        removed
                            ? "forgot \(forget)\n"
                            : "\(forget) was not paired in \(store.userKnownAccessoriesFile ?? "the user trust store")\n"
                    )
                    return
                }
                try await Self.pair(globals: globals, store: store, yes: yes)
            } catch let error as TLSError {
                throw CLIError(error.code == .invalidConfiguration ? .usage : .transport, error.message)
            }
        }
    }

    private static func pair(globals: GlobalOptions, store: TrustStore, yes: Bool) async throws {
        let (spec, _) = try globals.resolveDevice()
        if case .emulator = spec.kind {
            throw CLIError(
                .usage,
                "the in-process emulator does not speak TLS; pair with a device that does (serve --cert … on unix:PATH)"
            )
        }
        let inner = try GlobalOptions.clientTransport(for: spec)
        let tls = globals.tls
        let identity = tls.pairingIdentity(for: spec)
        let session = try await TLSTransport.fetchCertificates(
            from: inner,
            serverName: tls.tlsName,
            identity: try tls.identity(),
            minimumVersion: try tls.minimumVersion(),
            on: MultiThreadedEventLoopGroup.singleton.next()
        )
        guard let leaf = session.peerCertificates.first else {
            throw CLIError(.transport, "the accessory presented no certificate")
        }
        var text = """
            The accessory on \(spec) presented (\(session.protocolVersion), \(session.cipher)):
              subject:     \(leaf.subject)
              issuer:      \(leaf.issuer)

            """
        if !leaf.subjectAlternativeNames.isEmpty { text += "  names:       \(leaf.subjectAlternativeNames)\n" }
        text += """
              key pin:     \(leaf.spkiPin)
              certificate: SHA256 \(leaf.certificatePin.hex)

            """
        if session.peerCertificates.count > 1 {
            text += "  (with \(session.peerCertificates.count - 1) more certificate(s) in the chain)\n"
        }
        StandardError.write(text)
        if let known = try store.entry(for: identity) {
            if known.pin == leaf.spkiPin {
                StandardError.write("'\(identity)' is already paired with this key (\(known.file)).\n")
                return
            }
            // As ssh does for a changed host key: never replace it here, not even with --yes.
            throw CLIError(
                .transport,
                """
                '\(identity)' is paired with a DIFFERENT key: \(known.pin) (\(known.file)); this accessory presents \(leaf.spkiPin). \
                Someone may be intercepting the link, or the accessory was reset. Nothing was changed. \
                If the new key is expected, forget the old one first ('accessory-http trust --forget \(identity)') and pair again.
                """
            )
        }
        var mustConfirm = !yes
        if let name = tls.tlsName, !leaf.names(name) {
            StandardError.write(
                "WARNING: the certificate does not name '\(UntrustedText.printable(name))' (it names \(leaf.subjectAlternativeNames.isEmpty ? leaf.subject : leaf.subjectAlternativeNames)); requests with --tls-name \(UntrustedText.printable(name)) would refuse it.\n"
            )
            if yes {
                throw CLIError(
                    .usage,
                    "not pairing: the certificate does not carry the expected name '\(UntrustedText.printable(name))'; check that this is the right accessory and its --tls-name, or pair interactively (without --yes) to confirm anyway"
                )
            }
            mustConfirm = true
        }
        if mustConfirm {
            guard isatty(STDIN_FILENO) == 1 else {
                throw CLIError(
                    .usage,
                    "not pairing: stdin is not a terminal; check the fingerprint above and pass --yes to remember it"
                )
            }
            StandardError.write("Trust this accessory and remember it as '\(identity)'? [y/N] ")
            let answer = readLine()?.trimmingCharacters() ?? ""
            guard answer == "y" || answer == "Y" || answer.lowercased() == "yes" else {
                StandardError.write("not paired.\n")
                throw ExitCode(1)
            }
        }
        try store.remember(identity: identity, pin: leaf.spkiPin, comment: leaf.subject)
        StandardError.write(
            "paired '\(identity)' → \(leaf.spkiPin) in \(store.userKnownAccessoriesFile ?? "the trust store")\n"
        )
    }
}

extension String {
    fileprivate func trimmingCharacters() -> String {
        String(
            self.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed()
        )
    }
}
