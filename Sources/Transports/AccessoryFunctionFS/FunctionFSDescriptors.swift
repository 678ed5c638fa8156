/// The descriptors and strings a FunctionFS function writes to `ep0` before the gadget is
/// bound: one interface with a bulk IN endpoint (`ep1`) and a bulk OUT endpoint (`ep2`), for
/// full, high and super speed. Pure byte encoding, tested without a kernel.
public struct FunctionFSDescriptors: Sendable, Hashable {
    /// The interface's class code, `bInterfaceClass` (0xFF, vendor-specific, by default). With the
    /// default subclass and protocol it makes 0xFF/0x48/0x01, which `USBInterfaceClass.accessoryHTTP`
    /// (AccessoryUSB) and the udev rules match.
    public var interfaceClass: UInt8
    /// The interface's subclass code, `bInterfaceSubClass` (0x48 by default).
    public var interfaceSubclass: UInt8
    /// The interface's protocol code, `bInterfaceProtocol` (0x01 by default).
    public var interfaceProtocol: UInt8
    /// The interface string (US English), shown by `lsusb -v`.
    public var interfaceName: String

    /// Descriptors for an interface with these codes and name; the defaults describe this
    /// project's own interface, 0xFF/0x48/0x01 named `accessory-http`.
    ///
    /// - Parameters:
    ///   - interfaceClass: `bInterfaceClass` (0xFF, vendor-specific, by default).
    ///   - interfaceSubclass: `bInterfaceSubClass` (0x48 by default).
    ///   - interfaceProtocol: `bInterfaceProtocol` (0x01 by default).
    ///   - interfaceName: The interface string (`iInterface`, US English; NUL bytes are dropped
    ///     when it is encoded), `accessory-http` by default.
    public init(
        interfaceClass: UInt8 = 0xFF,
        interfaceSubclass: UInt8 = 0x48,
        interfaceProtocol: UInt8 = 0x01,
        interfaceName: String = "accessory-http"
    ) {
        self.interfaceClass = interfaceClass
        self.interfaceSubclass = interfaceSubclass
        self.interfaceProtocol = interfaceProtocol
        self.interfaceName = interfaceName
    }

    /// The endpoint file of the bulk IN endpoint (device to host), relative to the mount.
    public static let inputEndpointFile = "ep1"
    /// The endpoint file of the bulk OUT endpoint (host to device), relative to the mount.
    public static let outputEndpointFile = "ep2"

    /// Packet sizes per speed: 64 (full), 512 (high), 1024 (super).
    public static let maxPacketSizes: (full: Int, high: Int, superSpeed: Int) = (64, 512, 1024)

    static let descriptorsMagicV2: UInt32 = 3
    static let stringsMagic: UInt32 = 2
    static let hasFullSpeed: UInt32 = 1
    static let hasHighSpeed: UInt32 = 2
    static let hasSuperSpeed: UInt32 = 4

    /// `usb_functionfs_descs_head_v2`, the three counts, then the descriptors per speed.
    public var descriptorBlob: [UInt8] {
        var body: [UInt8] = []
        func interface() -> [UInt8] {
            // bLength, INTERFACE, bInterfaceNumber, bAlternateSetting, bNumEndpoints,
            // class, subclass, protocol, iInterface (string 1)
            [9, 4, 0, 0, 2, self.interfaceClass, self.interfaceSubclass, self.interfaceProtocol, 1]
        }
        func endpoint(_ address: UInt8, _ packet: Int) -> [UInt8] {
            // bLength, ENDPOINT, bEndpointAddress, bmAttributes (bulk), wMaxPacketSize, bInterval
            [7, 5, address, 2, UInt8(packet & 0xFF), UInt8(packet >> 8), 0]
        }
        let companion: [UInt8] = [6, 0x30, 0, 0, 0, 0]  // SS endpoint companion: no bursts, no streams
        let sizes = Self.maxPacketSizes
        body += interface() + endpoint(0x81, sizes.full) + endpoint(0x02, sizes.full)
        body += interface() + endpoint(0x81, sizes.high) + endpoint(0x02, sizes.high)
        body +=
            interface() + endpoint(0x81, sizes.superSpeed) + companion + endpoint(0x02, sizes.superSpeed) + companion
        var blob: [UInt8] = []
        let headerLength = 4 * 3 + 4 * 3
        Self.append32(Self.descriptorsMagicV2, to: &blob)
        Self.append32(UInt32(headerLength + body.count), to: &blob)
        Self.append32(Self.hasFullSpeed | Self.hasHighSpeed | Self.hasSuperSpeed, to: &blob)
        Self.append32(3, to: &blob)  // full-speed descriptor count
        Self.append32(3, to: &blob)  // high-speed
        Self.append32(5, to: &blob)  // super-speed (two companions)
        return blob + body
    }

    /// `usb_functionfs_strings_head`, then language 0x0409 with its one string.
    public var stringsBlob: [UInt8] {
        var strings: [UInt8] = [0x09, 0x04]
        strings += Array(self.interfaceName.utf8.filter { $0 != 0 }) + [0]
        var blob: [UInt8] = []
        Self.append32(Self.stringsMagic, to: &blob)
        Self.append32(UInt32(16 + strings.count), to: &blob)
        Self.append32(1, to: &blob)  // strings per language
        Self.append32(1, to: &blob)  // languages
        return blob + strings
    }

    static func append32(_ value: UInt32, to bytes: inout [UInt8]) {
        bytes += [UInt8(value & 0xFF), UInt8((value >> 8) & 0xFF), UInt8((value >> 16) & 0xFF), UInt8(value >> 24)]
    }
}

/// An event read from `ep0` (`struct usb_functionfs_event`, 12 bytes).
public struct FunctionFSEvent: Sendable, Hashable {
    /// The event's type (`enum usb_functionfs_event_type`, the byte at offset 8), with the
    /// kernel's `FUNCTIONFS_*` values.
    public enum Kind: UInt8, Sendable {
        /// The kernel's event types, in order: `bind` and `unbind` (the function was bound to or
        /// unbound from a gadget on a UDC), `enable` and `disable` (the host selected a configuration
        /// or alternate setting that includes the function, or deconfigured, reset or disconnected
        /// it), `setup` (a control request for the function arrived, see ``FunctionFSEvent/requestType``),
        /// `suspend` and `resume` (the bus was suspended or resumed).
        case bind = 0, unbind, enable, disable, setup, suspend, resume
    }

    /// `nil` for a type this code does not know.
    public var kind: Kind?
    /// For ``Kind/setup``: `bRequestType` (bit 7 set: device to host).
    public var requestType: UInt8

    /// The size of one event on the wire.
    public static let size = 12

    /// Decodes the events in `bytes` (a whole number of 12-byte records; a trailing partial
    /// record is ignored).
    public static func decode(_ bytes: ArraySlice<UInt8>) -> [FunctionFSEvent] {
        var events: [FunctionFSEvent] = []
        var index = bytes.startIndex
        while bytes.endIndex - index >= size {
            events.append(FunctionFSEvent(kind: Kind(rawValue: bytes[index + 8]), requestType: bytes[index]))
            index += size
        }
        return events
    }
}

/// Whether a write of `length` bytes to a bulk IN endpoint with packets of `maxPacketSize`
/// must be followed by a zero-length packet so the host's read ends there.
public func functionFSNeedsZeroLengthPacket(afterWriting length: Int, maxPacketSize: Int) -> Bool {
    length > 0 && maxPacketSize > 0 && length % maxPacketSize == 0
}
