import AccessoryBridge
import AccessoryTLS
import AccessoryTransport

@testable import AccessoryClient

/// Parsers of text from outside: a device's `WWW-Authenticate` fields, and the specs a user or
/// a config file writes.
enum TextParserTargets {
    /// `WWW-Authenticate` (RFC 9110 §11.6.1) and the Digest challenge validated from it.
    /// Asserts what callers rely on: a scheme is never empty, and a Digest challenge that
    /// validates has a nonce.
    static func auth(_ input: inout FuzzInput) {
        let text = input.text()
        for challenge in AuthenticationChallenge.parse(text) {
            FuzzCheck.require(!challenge.scheme.isEmpty, "a challenge without a scheme from \(text.debugDescription)")
            guard challenge.scheme.lowercased() == "digest" else { continue }
            if let digest = try? DigestChallenge(challenge) {
                FuzzCheck.require(!digest.nonce.isEmpty, "a Digest challenge without a nonce validated")
            }
        }
    }

    /// Device specs (`DeviceSpec(parsing:)`: the CLI, config files and the API), TLS pins and
    /// bridge listener addresses. A spec that parses prints a canonical form that parses back
    /// to an equal value (as `DeviceSpec` documents).
    static func spec(_ input: inout FuzzInput) {
        let text = input.text()
        if let spec = try? DeviceSpec(parsing: text) {
            let again = try? DeviceSpec(parsing: spec.description)
            FuzzCheck.require(
                again == spec,
                "\(text.debugDescription) parsed, but its canonical form \(spec.description.debugDescription) did not parse back to it"
            )
        }
        _ = try? TLSPin(parsing: text)
        _ = try? BridgeListener(parsing: text)
    }
}
