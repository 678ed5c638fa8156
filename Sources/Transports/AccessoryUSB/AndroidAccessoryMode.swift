import AccessoryTransport

/// The host side of the Android Open Accessory protocol (AOA 1 and 2), as the Android
/// documentation and the reference hosts (linux-adk, AOSP's accessorychat) define it: three
/// vendor requests to the device, after which the phone re-enumerates in accessory mode.
enum AndroidAccessoryMode {
    /// Google's vendor ID, which a phone in accessory mode enumerates with.
    static let googleVendorID: UInt16 = 0x18D1
    /// Accessory, accessory + ADB, accessory + audio, accessory + audio + ADB: the product IDs
    /// that have the accessory interface (0x2D02 and 0x2D03 are audio alone).
    static let accessoryProductIDs: Set<UInt16> = [0x2D00, 0x2D01, 0x2D04, 0x2D05]
    /// The accessory interface is the first one in every accessory-mode configuration.
    static let accessoryInterface = 0

    /// bmRequestType: vendor, device recipient (the direction bit is added per transfer).
    static let vendorDeviceRequest: UInt8 = 0x40
    static let getProtocol: UInt8 = 51
    static let sendString: UInt8 = 52
    static let start: UInt8 = 53
    static let timeoutMilliseconds: UInt32 = 1000

    /// Whether `vendorID:productID` is a phone already in accessory mode.
    static func isAccessoryMode(vendorID: UInt16, productID: UInt16) -> Bool {
        vendorID == Self.googleVendorID && Self.accessoryProductIDs.contains(productID)
    }

    /// GET_PROTOCOL (51): the AOA version the device supports, `nil` when it does not answer
    /// with a version of 1 or more (the request stalls on anything but an Android device).
    static func protocolVersion(of handle: LibUSBDeviceHandle) -> Int? {
        guard
            let answer = try? handle.controlIn(
                requestType: Self.vendorDeviceRequest,
                request: Self.getProtocol,
                value: 0,
                index: 0,
                length: 2,
                timeoutMilliseconds: Self.timeoutMilliseconds
            ), answer.count == 2
        else { return nil }
        let version = Int(answer[0]) | Int(answer[1]) << 8
        return version >= 1 ? version : nil
    }

    /// SEND_STRING (52) for each of the six strings, NUL-terminated, then START (53): the
    /// device disconnects and comes back in accessory mode.
    ///
    /// - Returns: START's error, if it had one: a phone that drops off the bus as it switches
    ///   can fail START's status stage (an I/O error, or no device) and still come back in
    ///   accessory mode, so only the caller's wait tells; a stall is a refusal.
    /// - Throws: The error of a SEND_STRING.
    static func switchToAccessoryMode(
        _ handle: LibUSBDeviceHandle,
        identity: AndroidAccessoryIdentity
    ) throws(LibUSBError) -> LibUSBError? {
        for (index, text) in identity.strings.enumerated() {
            try handle.controlOut(
                requestType: Self.vendorDeviceRequest,
                request: Self.sendString,
                value: 0,
                index: UInt16(index),
                data: Array(text.utf8) + [0],
                timeoutMilliseconds: Self.timeoutMilliseconds
            )
        }
        do {
            try handle.controlOut(
                requestType: Self.vendorDeviceRequest,
                request: Self.start,
                value: 0,
                index: 0,
                data: [],
                timeoutMilliseconds: Self.timeoutMilliseconds
            )
            return nil
        } catch {
            return error
        }
    }
}
