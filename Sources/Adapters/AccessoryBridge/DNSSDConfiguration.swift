/// Whether and how the bridge advertises its TCP listeners with DNS-SD (`_http._tcp`), as
/// ipp-usb does, through Avahi's `avahi-publish` when the machine has it.
///
/// Only listeners that other machines can reach are advertised (bound beyond loopback, which
/// needs ``AccessoryBridge/Configuration/allowRemote``): `avahi-publish` announces a service
/// on every interface with the host's addresses, so a loopback-only listener announced that
/// way would send other machines to an address that refuses them.
public struct DNSSDConfiguration: Sendable, Hashable {
    /// When to advertise.
    public enum Mode: String, Sendable, Hashable, CaseIterable {
        /// Never (the default for code that makes a bridge).
        case off
        /// When the publisher program is installed; silently not otherwise (the CLI's default).
        case auto
        /// Always: a bridge without the publisher program fails to bind
        /// (``BridgeError/Code/dnsSDUnavailable``).
        case on
    }

    /// When to advertise; ``Mode/off`` by default.
    public var mode: Mode = .off
    /// The service instance name; `nil` (the default) uses the accessory's model and serial
    /// number from its `GET /status` document, or the bridge's name when it has none.
    public var instanceName: String?
    /// The publisher program: a name looked up on `PATH`, or a path. `avahi-publish` by default.
    public var publisher = "avahi-publish"

    /// Advertising off, the instance name from the accessory, `avahi-publish` as the publisher.
    public init() {}

    /// `mode`, with the other settings at their defaults.
    public init(mode: Mode) {
        self.mode = mode
    }
}
