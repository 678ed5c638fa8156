extension DeviceSpec {
    /// The transport that opens this device, for the kinds this module implements.
    ///
    /// `DeviceResolver` (module AccessoryDevices) resolves every kind; use it for specs that
    /// come from users.
    ///
    /// - Throws: ``TransportError/Code/unsupported`` for ``emulator``, ``usb(_:)`` and ``aoa(_:)``, which
    ///   live in modules above this one, and for specs with link options (`session=`, `http=`).
    public func makeTransport() throws(TransportError) -> any ByteStreamTransport {
        guard self.link == LinkOptions() else {
            throw TransportError(
                .unsupported,
                "\(self) asks for link options (session=, http=) that layers above AccessoryTransport provide; resolve the spec with DeviceResolver (module AccessoryDevices)"
            )
        }
        switch self.kind {
        case .emulator:
            throw TransportError(
                .unsupported,
                "the emulator device is implemented above AccessoryTransport; resolve the spec with DeviceResolver (module AccessoryDevices), which handles every kind"
            )
        case .stdio:
            return StdioTransport()
        case .unix(let path):
            return UnixSocketTransport(path: path)
        case .exec(let command, let independentStreams):
            return ChildProcessTransport(command: command, opensIndependentStreams: independentStreams)
        case .serial(let path, let settings):
            return SerialTransport(path: path, settings: settings)
        case .usb(let selector):
            throw TransportError(
                .unsupported,
                "usb:\(selector) is opened by USBTransport in the AccessoryUSB module (libusb), not by AccessoryTransport; resolve the spec with DeviceResolver (module AccessoryDevices), which handles every kind"
            )
        case .aoa:
            throw TransportError(
                .unsupported,
                "\(self) is opened by AndroidAccessoryTransport in the AccessoryUSB module (libusb), not by AccessoryTransport; resolve the spec with DeviceResolver (module AccessoryDevices), which handles every kind"
            )
        }
    }
}
