/// Which USB accessory to open: vendor and product ID, optionally narrowed to one serial
/// number, one physical port, and one interface.
///
/// Opened by `USBTransport` in AccessoryUSB (libusb); ``DeviceSpec/makeTransport()`` in this
/// module throws ``TransportError/Code/unsupported`` for it, since AccessoryTransport does not link
/// libusb.
public struct USBDeviceSelector: Sendable, Hashable, CustomStringConvertible {
    /// The USB vendor ID (`idVendor`).
    public var vendorID: UInt16
    /// The USB product ID (`idProduct`).
    public var productID: UInt16
    /// The device's serial number string (`iSerialNumber`); `nil` matches any.
    public var serialNumber: String?
    /// The physical port path as Linux names it in sysfs, `BUS-PORT[.PORT…]` such as `1-2.3`;
    /// `nil` matches any.
    public var portPath: String?
    /// The interface (`bInterfaceNumber`) that carries the bulk endpoints; `nil` picks the
    /// first interface with a bulk IN and a bulk OUT endpoint.
    public var interfaceNumber: Int?

    /// A selector for the device with these IDs, narrowed by the optional criteria.
    ///
    /// - Parameters:
    ///   - vendorID: The USB vendor ID (`idVendor`).
    ///   - productID: The USB product ID (`idProduct`).
    ///   - serialNumber: The device's serial number string; `nil` (the default) matches any.
    ///   - portPath: The sysfs port path, `BUS-PORT[.PORT…]` such as `1-2.3`; `nil` (the default)
    ///     matches any. Not checked here.
    ///   - interfaceNumber: The interface that carries the bulk endpoints; `nil` (the default) picks
    ///     the first interface with a bulk IN and a bulk OUT endpoint.
    public init(
        vendorID: UInt16,
        productID: UInt16,
        serialNumber: String? = nil,
        portPath: String? = nil,
        interfaceNumber: Int? = nil
    ) {
        self.vendorID = vendorID
        self.productID = productID
        self.serialNumber = serialNumber
        self.portPath = portPath
        self.interfaceNumber = interfaceNumber
    }

    /// `VID:PID` in four lowercase hex digits each, as `lsusb` prints it, e.g. "1209:0001".
    public var description: String {
        "\(Self.hex4(self.vendorID)):\(Self.hex4(self.productID))"
    }

    static func hex4(_ value: UInt16) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 4 - digits.count) + digits
    }

    /// Whether `text` is a sysfs port path: a bus number, `-`, then port numbers joined by `.`.
    static func isValidPortPath(_ text: String) -> Bool {
        let busAndPorts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard busAndPorts.count == 2, isDecimal(busAndPorts[0]) else { return false }
        let ports = busAndPorts[1].split(separator: ".", omittingEmptySubsequences: false)
        return ports.allSatisfy(isDecimal)
    }

    private static func isDecimal(_ text: Substring) -> Bool {
        !text.isEmpty && text.count <= 3 && text.allSatisfy { $0.isASCII && $0.isNumber }
    }
}
