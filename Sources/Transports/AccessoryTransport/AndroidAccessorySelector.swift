/// Which Android device to switch into accessory mode (Android Open Accessory, AOA), and the
/// six strings that tell the phone which app should answer: the `aoa` device spec.
///
/// ```
/// aoa                                   the first Android device that answers GET_PROTOCOL
/// aoa:18d1:4ee7?manufacturer=Acme&model=Meter&uri=https://acme.example/meter
/// ```
///
/// A device already in accessory mode (18D1:2D00, 2D01, 2D04 or 2D05) is used as it is.
public struct AndroidAccessorySelector: Sendable, Hashable, CustomStringConvertible {
    /// The phone's vendor ID before it is switched; `nil` (with ``productID``): any device
    /// that answers GET_PROTOCOL.
    public var vendorID: UInt16?
    /// The phone's product ID before it is switched.
    public var productID: UInt16?
    /// The phone's physical port path (`port=`, as in `usb:` specs): chooses among several.
    public var portPath: String?
    /// The strings sent to the phone with SEND_STRING (request 52).
    public var identity: AndroidAccessoryIdentity

    /// A selector; `vendorID` and `productID` are both given or both `nil`.
    public init(
        vendorID: UInt16? = nil,
        productID: UInt16? = nil,
        portPath: String? = nil,
        identity: AndroidAccessoryIdentity = AndroidAccessoryIdentity()
    ) {
        self.vendorID = vendorID
        self.productID = productID
        self.portPath = portPath
        self.identity = identity
    }

    /// `18d1:4ee7`, or `any Android device` for a bare `aoa`.
    public var description: String {
        guard let vendorID, let productID else { return "any Android device" }
        return USBDeviceSelector.hex4(vendorID) + ":" + USBDeviceSelector.hex4(productID)
    }
}

/// The six identifying strings of an Android Open Accessory, in the order of their SEND_STRING
/// index (0 to 5). The phone picks the app whose accessory filter matches manufacturer, model
/// and version; with no such app it offers ``uri`` to the user.
public struct AndroidAccessoryIdentity: Sendable, Hashable {
    /// Index 0 (`manufacturer=`).
    public var manufacturer: String
    /// Index 1 (`model=`).
    public var model: String
    /// Index 2 (`description=`).
    public var description: String
    /// Index 3 (`version=`).
    public var version: String
    /// Index 4 (`uri=`): where to get the app, shown by the phone when no app matches.
    public var uri: String
    /// Index 5 (`serial=`): the accessory's own serial number, not the phone's.
    public var serial: String

    /// The defaults `accessory-http` sends.
    public init(
        manufacturer: String = "accessory-http",
        model: String = "accessory-http",
        description: String = "HTTP over USB",
        version: String = "1.0",
        uri: String = "",
        serial: String = ""
    ) {
        self.manufacturer = manufacturer
        self.model = model
        self.description = description
        self.version = version
        self.uri = uri
        self.serial = serial
    }

    /// The spec keys, in SEND_STRING index order.
    public static let keys = ["manufacturer", "model", "description", "version", "uri", "serial"]

    /// The strings in SEND_STRING index order.
    public var strings: [String] {
        [self.manufacturer, self.model, self.description, self.version, self.uri, self.serial]
    }

    /// Sets the string named by one of ``keys``; `false` for any other key.
    public mutating func set(_ key: String, to value: String) -> Bool {
        switch key {
        case "manufacturer": self.manufacturer = value
        case "model": self.model = value
        case "description": self.description = value
        case "version": self.version = value
        case "uri": self.uri = value
        case "serial": self.serial = value
        default: return false
        }
        return true
    }
}
