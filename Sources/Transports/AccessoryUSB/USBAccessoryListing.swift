import AccessoryTransport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// One attached USB device as `accessory-http list` shows it.
public struct USBAccessoryInfo: Sendable, Hashable {
    public var vendorID: UInt16
    public var productID: UInt16
    public var serialNumber: String?
    public var portPath: String
    public var deviceNode: String
    /// The interfaces that can carry an HTTP link.
    public var interfaces: [USBLinkInterface]
    /// Whether this process may open the device node for reading and writing.
    public var accessible: Bool

    public init(
        vendorID: UInt16,
        productID: UInt16,
        serialNumber: String?,
        portPath: String,
        deviceNode: String,
        interfaces: [USBLinkInterface],
        accessible: Bool
    ) {
        self.vendorID = vendorID
        self.productID = productID
        self.serialNumber = serialNumber
        self.portPath = portPath
        self.deviceNode = deviceNode
        self.interfaces = interfaces
        self.accessible = accessible
    }

    /// `1209:0001`.
    public var id: String { USBAccessoryListing.hex4(self.vendorID) + ":" + USBAccessoryListing.hex4(self.productID) }

    /// The device spec that opens exactly this device.
    public var deviceSpec: String {
        // A serial number is the device's own choice: one that would need escaping to print (or
        // cannot be written in a spec) is not offered; the port is.
        if let serial = self.serialNumber, !serial.isEmpty, !serial.contains("&"), !serial.contains("?"),
            !serial.contains(" "), UntrustedText.printable(serial) == serial
        {
            return "usb:\(self.id)?serial=\(serial)"
        }
        return "usb:\(self.id)?port=\(self.portPath)"
    }

    /// What to do when ``accessible`` is false.
    public var permissionHint: String? {
        guard !self.accessible else { return nil }
        return
            "no permission to open \(self.deviceNode): install the udev rules with this VID:PID (sudo udev/install --device \(self.id): udev/71-accessory-http-usb.rules plus a rule for it in 69-accessory-http-local.rules), then replug"
    }
}

/// Finds the attached accessories and renders them for people and programs.
public enum USBAccessoryListing {
    /// Every attached device that has a qualifying interface (or every device, with `all`).
    public static func scan(criteria: USBInterfaceCriteria = .init(), all: Bool = false) throws -> [USBAccessoryInfo] {
        let context = try LibUSBContext()
        var found: [USBAccessoryInfo] = []
        for device in try context.devices() {
            guard let descriptor = try? device.deviceDescriptor() else { continue }
            let interfaces = criteria.qualifying((try? device.activeInterfaces()) ?? [])
            guard all || !interfaces.isEmpty else { continue }
            let node = device.deviceNode
            let accessible = access(node, R_OK | W_OK) == 0
            var serial = device.sysfsSerialNumber
            if serial == nil && accessible, let handle = try? device.open() {
                serial = handle.asciiString(index: descriptor.iSerialNumber)
            }
            found.append(
                USBAccessoryInfo(
                    vendorID: descriptor.idVendor,
                    productID: descriptor.idProduct,
                    serialNumber: serial,
                    portPath: device.portPath,
                    deviceNode: node,
                    interfaces: interfaces,
                    accessible: accessible
                )
            )
        }
        return found.sorted { $0.portPath < $1.portPath }
    }

    /// One block per device, for people.
    public static func renderText(_ accessories: [USBAccessoryInfo]) -> String {
        guard !accessories.isEmpty else {
            return
                "No USB accessories found (no device has a vendor-specific or IPP-over-USB interface with a bulk IN/OUT pair).\n"
        }
        var text = ""
        for accessory in accessories {
            text +=
                "\(accessory.id)  port \(UntrustedText.printable(accessory.portPath))  serial \(accessory.serialNumber.map(UntrustedText.printable) ?? "-")  \(UntrustedText.printable(accessory.deviceNode))\n"
            text += "  spec: \(UntrustedText.printable(accessory.deviceSpec))\n"
            for interface in accessory.interfaces { text += "  \(interface)\n" }
            if accessory.interfaces.isEmpty { text += "  no qualifying interface\n" }
            text += accessory.permissionHint.map { "  \($0)\n" } ?? "  accessible: yes\n"
        }
        return text
    }

    /// A JSON array, one object per device; stable key order.
    public static func renderJSON(_ accessories: [USBAccessoryInfo]) -> String {
        func string(_ text: String?) -> String {
            guard let text else { return "null" }
            var out = "\""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                case "\t": out += "\\t"
                default:
                    // Controls (C0, DEL, C1), line separators and bidi overrides are escaped,
                    // so the JSON stays one line and printing it cannot drive a terminal.
                    switch scalar.value {
                    case 0x00..<0x20, 0x7F..<0xA0, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069:
                        let hex = String(scalar.value, radix: 16)
                        out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                    default:
                        out.unicodeScalars.append(scalar)
                    }
                }
            }
            return out + "\""
        }
        let objects = accessories.map { accessory -> String in
            let interfaces = accessory.interfaces.map { interface in
                "{\"number\":\(interface.interfaceNumber),\"alternateSetting\":\(interface.alternateSetting),\"class\":\(string(interface.interfaceClass.description)),\"in\":\(interface.input.address),\"out\":\(interface.output.address),\"maxPacketSize\":\(interface.output.maxPacketSize)}"
            }
            return
                "{\"id\":\(string(accessory.id)),\"vendorID\":\(accessory.vendorID),\"productID\":\(accessory.productID),\"serialNumber\":\(string(accessory.serialNumber)),\"port\":\(string(accessory.portPath)),\"deviceNode\":\(string(accessory.deviceNode)),\"spec\":\(string(accessory.deviceSpec)),\"accessible\":\(accessory.accessible),\"hint\":\(string(accessory.permissionHint)),\"interfaces\":[\(interfaces.joined(separator: ","))]}"
        }
        return "[" + objects.joined(separator: ",") + "]\n"
    }

    static func hex4(_ value: UInt16) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 4 - digits.count) + digits
    }
}
