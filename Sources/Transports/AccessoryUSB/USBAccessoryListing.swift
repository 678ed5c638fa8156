import AccessoryTransport
import CLibUSB

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// One attached USB device as `accessory-http list` shows it.
public struct USBAccessoryInfo: Sendable, Hashable {
    /// The USB vendor ID (`idVendor`).
    public var vendorID: UInt16
    /// The USB product ID (`idProduct`).
    public var productID: UInt16
    /// The serial number, from sysfs or else (when the device node is accessible) the device's
    /// `iSerialNumber` string descriptor; `nil` when neither gives one.
    public var serialNumber: String?
    /// The sysfs port path, `BUS-PORT[.PORT…]` such as `1-2.3`; stable across replugs into the
    /// same socket.
    public var portPath: String
    /// The usbfs device node, `/dev/bus/usb/BBB/DDD` (bus number and device address).
    public var deviceNode: String
    /// The interfaces that can carry an HTTP link.
    public var interfaces: [USBLinkInterface]
    /// Whether this process may open the device node for reading and writing.
    public var accessible: Bool
    /// The negotiated speed ("high (480 Mb/s)"), when the kernel reports it.
    public var speed: String?
    /// The qualifying interfaces that a program has claimed (through usbfs) right now.
    public var interfacesInUse: [Int] = []
    /// Whether this is an Android device that `aoa` can use: in accessory mode already, or
    /// switchable (it answered GET_PROTOCOL with this AOA version).
    public var android: AndroidStatus?

    /// What an Android device offers.
    public enum AndroidStatus: Sendable, Hashable {
        /// 18D1:2D00/2D01/2D04/2D05: in accessory mode, its interface 0 is the accessory's.
        case accessoryMode
        /// It answered GET_PROTOCOL with this version (1 or 2): `aoa:VID:PID` switches it.
        case switchable(protocolVersion: Int)
    }

    /// A device as found; ``speed`` and ``android`` start `nil` and ``interfacesInUse`` empty.
    ///
    /// - Parameters:
    ///   - vendorID: The USB vendor ID (`idVendor`).
    ///   - productID: The USB product ID (`idProduct`).
    ///   - serialNumber: The serial number, or `nil` if unknown.
    ///   - portPath: The sysfs port path, `BUS-PORT[.PORT…]` such as `1-2.3`.
    ///   - deviceNode: The usbfs device node, `/dev/bus/usb/BBB/DDD`.
    ///   - interfaces: The interfaces that can carry an HTTP link.
    ///   - accessible: Whether this process may open the device node for reading and writing.
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
        switch self.android {
        case .accessoryMode?: return "aoa?port=\(self.portPath)"
        case .switchable?: return "aoa:\(self.id)?port=\(self.portPath)"
        case nil: break
        }
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
            let node = device.deviceNode
            let accessible = access(node, R_OK | W_OK) == 0
            let android = Self.androidStatus(
                device,
                descriptor,
                hasInterfaces: !interfaces.isEmpty,
                accessible: accessible
            )
            guard all || !interfaces.isEmpty || android != nil else { continue }
            var serial = device.sysfsSerialNumber
            if serial == nil && accessible, let handle = try? device.open() {
                serial = handle.asciiString(index: descriptor.iSerialNumber)
            }
            var info = USBAccessoryInfo(
                vendorID: descriptor.idVendor,
                productID: descriptor.idProduct,
                serialNumber: serial,
                portPath: device.portPath,
                deviceNode: node,
                interfaces: interfaces,
                accessible: accessible
            )
            info.speed = device.speed
            info.interfacesInUse = interfaces.map(\.interfaceNumber).filter { Self.isClaimed(device.portPath, $0) }
            info.android = android
            found.append(info)
        }
        return found.sorted { $0.portPath < $1.portPath }
    }

    /// Whether an Android device `aoa` can use. Devices that are not hubs and have no
    /// qualifying interface of their own are asked GET_PROTOCOL (a read-only vendor request
    /// that reference AOA hosts send to every device) when this process may open them.
    static func androidStatus(
        _ device: LibUSBDevice,
        _ descriptor: libusb_device_descriptor,
        hasInterfaces: Bool,
        accessible: Bool
    ) -> USBAccessoryInfo.AndroidStatus? {
        if AndroidAccessoryMode.isAccessoryMode(vendorID: descriptor.idVendor, productID: descriptor.idProduct) {
            return .accessoryMode
        }
        guard !hasInterfaces, accessible, descriptor.bDeviceClass != 0x09, let handle = try? device.open() else {
            return nil
        }
        return AndroidAccessoryMode.protocolVersion(of: handle).map { .switchable(protocolVersion: $0) }
    }

    /// Whether a program holds `interface` of the device on `portPath` (usbfs is its driver).
    static func isClaimed(_ portPath: String, _ interface: Int) -> Bool {
        var configuration = "1"
        if let file = fopen("/sys/bus/usb/devices/\(portPath)/bConfigurationValue", "r") {
            var buffer = [CChar](repeating: 0, count: 8)
            if fgets(&buffer, Int32(buffer.count), file) != nil {
                let text = String(
                    decoding: buffer.prefix(while: { $0 != 0 && $0 != 10 }).map { UInt8(bitPattern: $0) },
                    as: UTF8.self
                )
                if !text.isEmpty { configuration = text }
            }
            fclose(file)
        }
        var target = [CChar](repeating: 0, count: 256)
        let count = readlink(
            "/sys/bus/usb/devices/\(portPath):\(configuration).\(interface)/driver",
            &target,
            target.count - 1
        )
        guard count > 0 else { return false }
        let link = String(decoding: target.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return link.hasSuffix("/usbfs")
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
            if let speed = accessory.speed { text += "  speed: \(speed)\n" }
            switch accessory.android {
            case .accessoryMode?: text += "  Android device in accessory mode (interface 0)\n"
            case .switchable(let version)?:
                text += "  Android device (AOA \(version)): aoa switches it into accessory mode\n"
            case nil: break
            }
            for interface in accessory.interfaces {
                let used = accessory.interfacesInUse.contains(interface.interfaceNumber) ? " (in use by a program)" : ""
                text += "  \(interface)\(used)\n"
            }
            if accessory.interfaces.isEmpty && accessory.android == nil { text += "  no qualifying interface\n" }
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
            let android: String
            switch accessory.android {
            case .accessoryMode?: android = "{\"accessoryMode\":true,\"protocol\":null}"
            case .switchable(let version)?: android = "{\"accessoryMode\":false,\"protocol\":\(version)}"
            case nil: android = "null"
            }
            return
                "{\"id\":\(string(accessory.id)),\"vendorID\":\(accessory.vendorID),\"productID\":\(accessory.productID),\"serialNumber\":\(string(accessory.serialNumber)),\"port\":\(string(accessory.portPath)),\"deviceNode\":\(string(accessory.deviceNode)),\"spec\":\(string(accessory.deviceSpec)),\"accessible\":\(accessory.accessible),\"hint\":\(string(accessory.permissionHint)),\"speed\":\(string(accessory.speed)),\"android\":\(android),\"inUse\":[\(accessory.interfacesInUse.map(String.init).joined(separator: ","))],\"interfaces\":[\(interfaces.joined(separator: ","))]}"
        }
        return "[" + objects.joined(separator: ",") + "]\n"
    }

    static func hex4(_ value: UInt16) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 4 - digits.count) + digits
    }
}
