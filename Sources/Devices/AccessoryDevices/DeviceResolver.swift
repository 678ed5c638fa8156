import AccessoryEmulator
import AccessorySession
import AccessoryTransport
import AccessoryUSB
import NIOCore
import NIOPosix

/// Turns any device spec into the transport that opens it: the one place where every kind of
/// spec is resolved, used by the CLI, URLSession routes (`AccessoryRoute(device:)`) and
/// anything else that takes a spec from a user.
///
/// `DeviceSpec.makeTransport()` in AccessoryTransport opens the kinds that module implements
/// (`unix:`, `exec:`, `serial:`, `stdio`); this resolver sits above the modules that implement
/// the rest and adds them: `emulator` (the built-in emulated accessory, served in this process
/// on a socketpair), `usb:` (libusb bulk endpoints, with per-device quirks) and `aoa`
/// (an Android device in accessory mode).
///
/// ```swift
/// let transport = try DeviceResolver().transport(for: DeviceSpec(parsing: "usb:1209:0001"))
/// let client = AccessoryClient(transport: transport)
/// ```
public struct DeviceResolver: Sendable {
    /// Where the emulated accessory runs (its responder, for `emulator`).
    public var eventLoopGroup: any EventLoopGroup
    /// Quirks for `usb:` devices, keyed by the selector as written (`1209:0001`,
    /// `1209:0001?serial=X`): what `quirks` lines in the config file give.
    public var usbQuirks: [String: USBQuirks]
    /// The opener's settings for specs with `session=on` or `session=auto`.
    public var sessionConfiguration = SessionTransport.Configuration()

    /// A resolver with the shared event loop group and no USB quirks.
    public init(
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        usbQuirks: [String: USBQuirks] = [:]
    ) {
        self.eventLoopGroup = eventLoopGroup
        self.usbQuirks = usbQuirks
    }

    /// The transport for `spec`. Nothing is opened yet: the link opens it on its first request.
    ///
    /// `session=on` wraps the device's transport in a `SessionTransport`, `session=auto` in an
    /// `AutoSessionTransport` (module AccessorySession).
    ///
    /// `http=` is not the transport's business: the client reads it from the spec
    /// (`LinkConfiguration.httpVersion`).
    public func transport(for spec: DeviceSpec) throws(TransportError) -> any ByteStreamTransport {
        let device: any ByteStreamTransport
        switch spec.kind {
        case .emulator:
            device = EmulatedAccessory().socketPairTransport(on: self.eventLoopGroup)
        case .usb(let selector):
            var configuration = USBTransport.Configuration()
            if let quirks = self.quirks(for: selector) { configuration.apply(quirks) }
            device = USBTransport(selector: selector, configuration: configuration)
        case .aoa(let selector):
            // Quirks for the phone's own VID:PID (a `[usb VID:PID]` section) apply to its
            // accessory-mode link too.
            var configuration = AndroidAccessoryTransport.Configuration()
            if let vendorID = selector.vendorID, let productID = selector.productID,
                let quirks = self.quirks(for: USBDeviceSelector(vendorID: vendorID, productID: productID))
            {
                configuration.usb.apply(quirks)
            }
            device = AndroidAccessoryTransport(selector: selector, configuration: configuration)
        case .stdio, .unix, .exec, .serial:
            device = try DeviceSpec(spec.kind).makeTransport()
        }
        switch spec.link.session {
        case .off: return device
        case .on: return SessionTransport(wrapping: device, configuration: self.sessionConfiguration)
        case .auto: return AutoSessionTransport(wrapping: device, configuration: self.sessionConfiguration)
        }
    }

    /// How many links `spec`'s device can carry at once, each through its own transport: for a
    /// `usb:` spec without `interface=`, the device's qualifying interfaces as attached now (at
    /// most its `max-interfaces` quirk), since each open claims the first free one; 1 for every
    /// other kind, and for a USB device that is not attached.
    public func concurrentLinks(for spec: DeviceSpec) -> Int {
        guard case .usb(let selector) = spec.kind else { return 1 }
        var configuration = USBTransport.Configuration()
        if let quirks = self.quirks(for: selector) { configuration.apply(quirks) }
        return USBTransport(selector: selector, configuration: configuration).concurrentLinks()
    }

    /// The quirks configured for `selector`, if any.
    public func quirks(for selector: USBDeviceSelector) -> USBQuirks? {
        self.usbQuirks[selector.description]
    }
}
