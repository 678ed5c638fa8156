extension DeviceSpec {
    /// The transport that opens this device.
    ///
    /// - Throws: ``TransportError/Code/unsupported`` for ``emulator`` (the client layer
    ///   supplies the emulator's transport) and for ``usb(_:)`` (AccessoryUSB's `USBTransport`
    ///   opens it; this module does not link libusb).
    public func makeTransport() throws(TransportError) -> any ByteStreamTransport {
        switch self {
        case .emulator:
            throw TransportError(
                .unsupported,
                "the emulator device is resolved by the client layer, not by AccessoryTransport; open it through AccessoryClient"
            )
        case .stdio:
            return StdioTransport()
        case .unix(let path):
            return UnixSocketTransport(path: path)
        case .exec(let command):
            return ChildProcessTransport(command: command)
        case .serial(let path, let settings):
            return SerialTransport(path: path, settings: settings)
        case .usb(let selector):
            throw TransportError(
                .unsupported,
                "usb:\(selector) is opened by USBTransport in the AccessoryUSB module (libusb), not by AccessoryTransport; use USBTransport(selector:) (the accessory-http CLI does)"
            )
        }
    }
}
