import AccessoryBridge
import AccessoryDevices
import AccessoryTLS
import AccessoryTransport

@testable import AccessoryClient

/// Parsers of text from outside: a device's `WWW-Authenticate` fields, the specs a user or a
/// config file writes, and the config file itself.
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

    /// The settings file (`ConfigFile.parse`). An error names the file and a line that exists
    /// (`fuzz.conf:N:`, as the CLI's messages promise); a file that parses has only complete
    /// bridge sections, its timeout makes a `Duration`, and its USB sections' keys are already in
    /// normal form (a key written back as `[usb KEY]` parses to itself).
    static func config(_ input: inout FuzzInput) {
        let text = input.text()
        let lines = ConfigFile.lines(of: text).count
        let config: ConfigFile
        do {
            config = try ConfigFile.parse(text, path: "fuzz.conf")
        } catch {
            let rest = error.message.dropFirst("fuzz.conf:".count)
            let line = Int(rest.prefix(while: \.isNumber)) ?? 0
            FuzzCheck.require(
                error.message.hasPrefix("fuzz.conf:") && (1...lines).contains(line),
                "an error that names no line of the file: \(error.message.debugDescription)"
            )
            return
        }
        let values = [config.device, config.host] + config.bridges.flatMap { [$0.device, $0.host] + $0.listen }
        for case let value? in values {
            FuzzCheck.require(
                !value.contains(where: \.isNewline),
                "a value with a line break in it: \(value.debugDescription)"
            )
        }
        // The CLI makes a Duration of the timeout, and Duration traps on `inf` or 1e300.
        if let timeout = config.timeout { _ = Duration.seconds(timeout) }
        for bridge in config.bridges {
            FuzzCheck.require(
                bridge.device != nil && !bridge.listen.isEmpty,
                "an incomplete [bridge \(bridge.name)] parsed"
            )
        }
        for key in config.usbQuirks.keys {
            let again = try? ConfigFile.parse("[usb \(key)]", path: "fuzz.conf").usbQuirks.keys.first
            FuzzCheck.require(again == key, "the USB section key \(key.debugDescription) is not in normal form")
        }
    }
}
