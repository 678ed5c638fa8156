/// A bulk, interrupt or isochronous endpoint as its descriptor describes it.
public struct USBEndpointDescription: Sendable, Hashable {
    /// `bEndpointAddress`: the number, with bit 7 set for IN (device to host).
    public var address: UInt8
    /// `bmAttributes`: the transfer type is in bits 0–1 (2 = bulk).
    public var attributes: UInt8
    /// `wMaxPacketSize` (bits 0–10 are the size; high-bandwidth bits are ignored).
    public var maxPacketSize: Int

    /// An endpoint with these descriptor fields.
    ///
    /// - Parameters:
    ///   - address: `bEndpointAddress`: the endpoint number in bits 0–3, with bit 7 set for IN.
    ///   - attributes: `bmAttributes`: the transfer type in bits 0–1 (0 control, 1 isochronous,
    ///     2 bulk, 3 interrupt).
    ///   - maxPacketSize: The largest packet in bytes (bits 0–10 of `wMaxPacketSize`).
    public init(address: UInt8, attributes: UInt8, maxPacketSize: Int) {
        self.address = address
        self.attributes = attributes
        self.maxPacketSize = maxPacketSize
    }

    /// Whether data flows from the device to the host.
    public var isIn: Bool { self.address & 0x80 != 0 }
    /// Whether this is a bulk endpoint.
    public var isBulk: Bool { self.attributes & 0x03 == 2 }
}

/// A class, subclass and protocol triple, as interface descriptors carry it.
public struct USBInterfaceClass: Sendable, Hashable, CustomStringConvertible {
    /// The class code (`bInterfaceClass`), e.g. 0xFF for vendor-specific.
    public var classCode: UInt8
    /// The subclass code (`bInterfaceSubClass`); `nil` matches any subclass.
    public var subclass: UInt8?
    /// The protocol code (`bInterfaceProtocol`); `nil` matches any protocol.
    public var protocolCode: UInt8?

    /// A class triple, or a pattern when the subclass or protocol is left out.
    ///
    /// - Parameters:
    ///   - classCode: The class code (`bInterfaceClass`).
    ///   - subclass: The subclass code (`bInterfaceSubClass`); `nil` (the default) matches any.
    ///   - protocolCode: The protocol code (`bInterfaceProtocol`); `nil` (the default) matches any.
    public init(classCode: UInt8, subclass: UInt8? = nil, protocolCode: UInt8? = nil) {
        self.classCode = classCode
        self.subclass = subclass
        self.protocolCode = protocolCode
    }

    /// IPP over USB (7/1/4): every such interface carries one HTTP/1.1 link.
    public static let ippOverUSB = USBInterfaceClass(classCode: 0x07, subclass: 0x01, protocolCode: 0x04)
    /// This project's own vendor-specific interface (0xFF/0x48/0x01), served by the FunctionFS
    /// responder and matched by the udev rules as `ID_USB_INTERFACES` `ff4801`.
    public static let accessoryHTTP = USBInterfaceClass(classCode: 0xFF, subclass: 0x48, protocolCode: 0x01)
    /// Any vendor-specific interface (0xFF with any subclass and protocol).
    public static let anyVendorSpecific = USBInterfaceClass(classCode: 0xFF)

    /// Whether an interface with these codes matches.
    public func matches(classCode: UInt8, subclass: UInt8, protocolCode: UInt8) -> Bool {
        classCode == self.classCode && (self.subclass ?? subclass) == subclass
            && (self.protocolCode ?? protocolCode) == protocolCode
    }

    /// `ff/48/01`, with `*` for a wildcard.
    public var description: String {
        func hex(_ value: UInt8?) -> String {
            guard let value else { return "*" }
            let digits = String(value, radix: 16)
            return digits.count == 1 ? "0" + digits : digits
        }
        return "\(hex(self.classCode))/\(hex(self.subclass))/\(hex(self.protocolCode))"
    }

    /// Parses `CC/SS/PP` in hex (`*` for any subclass or protocol), e.g. `ff/48/01` or `ff/*/*`.
    public init?(parsing text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, let classCode = UInt8(parts[0], radix: 16), parts[0].count <= 2 else { return nil }
        func field(_ part: Substring) -> UInt8?? {
            if part == "*" { return .some(nil) }
            guard part.count <= 2, let value = UInt8(part, radix: 16) else { return nil }
            return .some(value)
        }
        guard let subclass = field(parts[1]), let protocolCode = field(parts[2]) else { return nil }
        self.init(classCode: classCode, subclass: subclass, protocolCode: protocolCode)
    }
}

/// One alternate setting of one interface, as the active configuration describes it.
public struct USBInterfaceDescription: Sendable, Hashable {
    /// The interface's number in the configuration (`bInterfaceNumber`).
    public var interfaceNumber: Int
    /// Which alternate setting of the interface this is (`bAlternateSetting`; 0 is the default).
    public var alternateSetting: Int
    /// The class code (`bInterfaceClass`), e.g. 0xFF for vendor-specific.
    public var classCode: UInt8
    /// The subclass code (`bInterfaceSubClass`), whose meaning depends on the class.
    public var subclass: UInt8
    /// The protocol code (`bInterfaceProtocol`), whose meaning depends on class and subclass.
    public var protocolCode: UInt8
    /// The setting's endpoints in descriptor order (endpoint 0 is not among them).
    public var endpoints: [USBEndpointDescription]

    /// A setting with these descriptor fields.
    ///
    /// - Parameters:
    ///   - interfaceNumber: The interface's number (`bInterfaceNumber`).
    ///   - alternateSetting: The alternate setting's number (`bAlternateSetting`).
    ///   - classCode: The class code (`bInterfaceClass`).
    ///   - subclass: The subclass code (`bInterfaceSubClass`).
    ///   - protocolCode: The protocol code (`bInterfaceProtocol`).
    ///   - endpoints: The setting's endpoints, in descriptor order.
    public init(
        interfaceNumber: Int,
        alternateSetting: Int,
        classCode: UInt8,
        subclass: UInt8,
        protocolCode: UInt8,
        endpoints: [USBEndpointDescription]
    ) {
        self.interfaceNumber = interfaceNumber
        self.alternateSetting = alternateSetting
        self.classCode = classCode
        self.subclass = subclass
        self.protocolCode = protocolCode
        self.endpoints = endpoints
    }

    /// The first bulk IN and the first bulk OUT endpoint, if the setting has both.
    public var bulkPair: (input: USBEndpointDescription, output: USBEndpointDescription)? {
        guard let input = self.endpoints.first(where: { $0.isBulk && $0.isIn }),
            let output = self.endpoints.first(where: { $0.isBulk && !$0.isIn })
        else { return nil }
        return (input, output)
    }
}

/// An interface that can carry an HTTP/1.1 link: the setting to select and its bulk pair.
public struct USBLinkInterface: Sendable, Hashable, CustomStringConvertible {
    /// The interface to claim (`bInterfaceNumber`).
    public var interfaceNumber: Int
    /// The alternate setting to select (`bAlternateSetting`).
    public var alternateSetting: Int
    /// The setting's class, subclass and protocol (never a wildcard).
    public var interfaceClass: USBInterfaceClass
    /// The bulk IN endpoint, which carries bytes from the device to the host.
    public var input: USBEndpointDescription
    /// The bulk OUT endpoint, which carries bytes from the host to the device.
    public var output: USBEndpointDescription

    /// `interface 0 (alt 0, ff/48/01, IN 0x81 OUT 0x2, 512 B packets)`; the packet size is the
    /// OUT endpoint's.
    public var description: String {
        "interface \(self.interfaceNumber) (alt \(self.alternateSetting), \(self.interfaceClass), IN 0x\(String(self.input.address, radix: 16)) OUT 0x\(String(self.output.address, radix: 16)), \(self.output.maxPacketSize) B packets)"
    }
}

/// Which interfaces of a device qualify as HTTP links.
public struct USBInterfaceCriteria: Sendable, Hashable {
    /// Only this interface (`interface=N` in the device spec); its class does not matter then.
    public var interfaceNumber: Int?
    /// Interface classes that qualify when no number is given.
    public var classes: [USBInterfaceClass]

    /// The project's own interface, any vendor-specific one, and IPP over USB.
    public static let defaultClasses: [USBInterfaceClass] = [.accessoryHTTP, .anyVendorSpecific, .ippOverUSB]

    /// Criteria that take one interface by number, or every interface of the given classes.
    ///
    /// - Parameters:
    ///   - interfaceNumber: Only this interface, whatever its class; `nil` (the default) matches
    ///     by class.
    ///   - classes: The classes that qualify when no number is given; ``defaultClasses`` by default.
    public init(interfaceNumber: Int? = nil, classes: [USBInterfaceClass] = Self.defaultClasses) {
        self.interfaceNumber = interfaceNumber
        self.classes = classes
    }

    /// The qualifying interfaces in interface-number order, at most one setting each: the
    /// lowest alternate setting that has a bulk IN and a bulk OUT endpoint.
    public func qualifying(_ settings: [USBInterfaceDescription]) -> [USBLinkInterface] {
        var chosen: [Int: USBLinkInterface] = [:]
        for setting in settings.sorted(by: {
            ($0.interfaceNumber, $0.alternateSetting) < ($1.interfaceNumber, $1.alternateSetting)
        }) {
            guard chosen[setting.interfaceNumber] == nil, let pair = setting.bulkPair else { continue }
            if let number = self.interfaceNumber {
                guard setting.interfaceNumber == number else { continue }
            } else {
                guard
                    self.classes.contains(where: {
                        $0.matches(
                            classCode: setting.classCode,
                            subclass: setting.subclass,
                            protocolCode: setting.protocolCode
                        )
                    })
                else { continue }
            }
            chosen[setting.interfaceNumber] = USBLinkInterface(
                interfaceNumber: setting.interfaceNumber,
                alternateSetting: setting.alternateSetting,
                interfaceClass: USBInterfaceClass(
                    classCode: setting.classCode,
                    subclass: setting.subclass,
                    protocolCode: setting.protocolCode
                ),
                input: pair.input,
                output: pair.output
            )
        }
        return chosen.keys.sorted().compactMap { chosen[$0] }
    }
}
