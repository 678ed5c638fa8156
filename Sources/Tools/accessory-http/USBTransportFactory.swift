import AccessoryTransport
import AccessoryUSB

/// Maps `usb:VID:PID…` device specs to the libusb transport, with the device's quirks from the
/// config file (title-case-headers is applied to the link configuration by `makeClient`) (AccessoryTransport cannot depend on AccessoryUSB, so the CLI does this).
enum USBTransportFactory {
    static func transport(for selector: USBDeviceSelector, config: ConfigFile?) -> USBTransport {
        var configuration = USBTransport.Configuration()
        if let quirks = config?.usbQuirks[selector.description] {
            configuration.apply(quirks)
        }
        return USBTransport(selector: selector, configuration: configuration)
    }
}
