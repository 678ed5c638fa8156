import CLibUSB

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// Thin typed wrappers over libusb-1.0: each owns one libusb object and frees it exactly once,
// and every failing call becomes a `LibUSBError`. Nothing here knows about HTTP.

/// A libusb error code (`LIBUSB_ERROR_*`) with its name, as a Swift error.
public struct LibUSBError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The negative `libusb_error` value.
    public let rawValue: Int32

    /// The error for a libusb return value.
    ///
    /// - Parameter rawValue: The negative `libusb_error` value a libusb call returned.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// `LIBUSB_ERROR_IO`: an input/output error.
    public static let io = LibUSBError(rawValue: LIBUSB_ERROR_IO.rawValue)
    /// `LIBUSB_ERROR_ACCESS`: access denied, e.g. no permission to open the device node.
    public static let access = LibUSBError(rawValue: LIBUSB_ERROR_ACCESS.rawValue)
    /// `LIBUSB_ERROR_NO_DEVICE`: no such device; it may have been disconnected.
    public static let noDevice = LibUSBError(rawValue: LIBUSB_ERROR_NO_DEVICE.rawValue)
    /// `LIBUSB_ERROR_NOT_FOUND`: the requested entity (interface, endpoint, or a device that
    /// re-enumerated) was not found.
    public static let notFound = LibUSBError(rawValue: LIBUSB_ERROR_NOT_FOUND.rawValue)
    /// `LIBUSB_ERROR_BUSY`: the resource is busy, e.g. another program has claimed the interface.
    public static let busy = LibUSBError(rawValue: LIBUSB_ERROR_BUSY.rawValue)
    /// `LIBUSB_ERROR_TIMEOUT`: the operation timed out.
    public static let timeout = LibUSBError(rawValue: LIBUSB_ERROR_TIMEOUT.rawValue)
    /// `LIBUSB_ERROR_PIPE`: a pipe error; the endpoint stalled (is halted) or the device refused
    /// a control request.
    public static let pipe = LibUSBError(rawValue: LIBUSB_ERROR_PIPE.rawValue)
    /// `LIBUSB_ERROR_NOT_SUPPORTED`: the operation is not supported on this platform or device.
    public static let notSupported = LibUSBError(rawValue: LIBUSB_ERROR_NOT_SUPPORTED.rawValue)

    /// `LIBUSB_ERROR_ACCESS` and so on.
    public var name: String { String(cString: libusb_error_name(self.rawValue)) }
    public var description: String { "\(self.name) (\(String(cString: libusb_strerror(self.rawValue))))" }

    /// Throws for a negative return value, passes a non-negative one through.
    @discardableResult
    static func check(_ result: Int32) throws(LibUSBError) -> Int32 {
        guard result >= 0 else { throw LibUSBError(rawValue: result) }
        return result
    }
}

/// A libusb context (`libusb_context *`). Each transport open makes a fresh one, so the device
/// list is current even when no udev daemon reports hot-plug events.
///
/// `@unchecked Sendable`: the pointer never changes after `init`, libusb contexts may be used
/// from any thread (libusb serialises internally), and `libusb_exit` runs in `deinit`, when no
/// other reference (and so no handle or device, which hold one) remains.
final class LibUSBContext: @unchecked Sendable {
    let pointer: OpaquePointer

    init() throws(LibUSBError) {
        var context: OpaquePointer?
        try LibUSBError.check(libusb_init(&context))
        guard let context else { throw LibUSBError.io }
        self.pointer = context
    }

    deinit { libusb_exit(self.pointer) }

    /// Every attached device.
    func devices() throws(LibUSBError) -> [LibUSBDevice] {
        var list: UnsafeMutablePointer<OpaquePointer?>?
        let count = try LibUSBError.check(Int32(truncatingIfNeeded: libusb_get_device_list(self.pointer, &list)))
        guard let list else { return [] }
        defer { libusb_free_device_list(list, 1) }
        var devices: [LibUSBDevice] = []
        for index in 0..<Int(count) {
            if let device = list[index] { devices.append(LibUSBDevice(device, context: self)) }
        }
        return devices
    }

    /// Handles pending events for at most `milliseconds` (`libusb_handle_events_timeout_completed`).
    func handleEvents(milliseconds: Int) -> Int32 {
        var timeout = timeval(tv_sec: milliseconds / 1000, tv_usec: (milliseconds % 1000) * 1000)
        return libusb_handle_events_timeout_completed(self.pointer, &timeout, nil)
    }
}

/// A reference to an attached device (`libusb_device *`); opening it needs permission,
/// reading its descriptors does not.
///
/// `@unchecked Sendable`: the pointer is immutable and reference-counted by libusb (one
/// reference is taken in `init` and dropped in `deinit`); libusb's device functions are
/// thread-safe.
final class LibUSBDevice: @unchecked Sendable {
    let pointer: OpaquePointer
    let context: LibUSBContext

    init(_ pointer: OpaquePointer, context: LibUSBContext) {
        self.pointer = libusb_ref_device(pointer)
        self.context = context
    }

    deinit { libusb_unref_device(self.pointer) }

    var busNumber: Int { Int(libusb_get_bus_number(self.pointer)) }
    var deviceAddress: Int { Int(libusb_get_device_address(self.pointer)) }

    /// The device node usbfs gives it, `/dev/bus/usb/BBB/DDD`.
    var deviceNode: String {
        func three(_ value: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, 3 - digits.count)) + digits
        }
        return "/dev/bus/usb/\(three(self.busNumber))/\(three(self.deviceAddress))"
    }

    /// The sysfs port path, `BUS-PORT[.PORT…]`, e.g. `1-2.3`; stable across replugs into the
    /// same socket. Root hubs (no port) give `usbBUS`.
    var portPath: String {
        var ports = [UInt8](repeating: 0, count: 8)
        let count = libusb_get_port_numbers(self.pointer, &ports, Int32(ports.count))
        guard count > 0 else { return "usb\(self.busNumber)" }
        return "\(self.busNumber)-" + ports[0..<Int(count)].map { String($0) }.joined(separator: ".")
    }

    func deviceDescriptor() throws(LibUSBError) -> libusb_device_descriptor {
        var descriptor = libusb_device_descriptor()
        try LibUSBError.check(libusb_get_device_descriptor(self.pointer, &descriptor))
        return descriptor
    }

    /// Every interface setting of the active configuration.
    func activeInterfaces() throws(LibUSBError) -> [USBInterfaceDescription] {
        var config: UnsafeMutablePointer<libusb_config_descriptor>?
        try LibUSBError.check(libusb_get_active_config_descriptor(self.pointer, &config))
        guard let config else { return [] }
        defer { libusb_free_config_descriptor(config) }
        var settings: [USBInterfaceDescription] = []
        guard let interfaces = config.pointee.interface else { return [] }
        for interfaceIndex in 0..<Int(config.pointee.bNumInterfaces) {
            let interface = interfaces[interfaceIndex]
            guard let alternates = interface.altsetting else { continue }
            for alternateIndex in 0..<Int(max(0, interface.num_altsetting)) {
                let setting = alternates[alternateIndex]
                var endpoints: [USBEndpointDescription] = []
                if let list = setting.endpoint {
                    for endpointIndex in 0..<Int(setting.bNumEndpoints) {
                        let endpoint = list[endpointIndex]
                        endpoints.append(
                            USBEndpointDescription(
                                address: endpoint.bEndpointAddress,
                                attributes: endpoint.bmAttributes,
                                maxPacketSize: Int(endpoint.wMaxPacketSize & 0x07FF)
                            )
                        )
                    }
                }
                settings.append(
                    USBInterfaceDescription(
                        interfaceNumber: Int(setting.bInterfaceNumber),
                        alternateSetting: Int(setting.bAlternateSetting),
                        classCode: setting.bInterfaceClass,
                        subclass: setting.bInterfaceSubClass,
                        protocolCode: setting.bInterfaceProtocol,
                        endpoints: endpoints
                    )
                )
            }
        }
        return settings
    }

    /// The serial number from sysfs (readable without opening the device), or `nil`.
    var sysfsSerialNumber: String? {
        guard let file = fopen("/sys/bus/usb/devices/\(self.portPath)/serial", "r") else { return nil }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 256)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return nil }
        let text = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return text.hasSuffix("\n") ? String(text.dropLast()) : text
    }

    /// The negotiated speed as people say it ("high (480 Mb/s)"), or `nil` when unknown.
    var speed: String? {
        switch libusb_speed(rawValue: UInt32(libusb_get_device_speed(self.pointer))) {
        case LIBUSB_SPEED_LOW: return "low (1.5 Mb/s)"
        case LIBUSB_SPEED_FULL: return "full (12 Mb/s)"
        case LIBUSB_SPEED_HIGH: return "high (480 Mb/s)"
        case LIBUSB_SPEED_SUPER: return "super (5 Gb/s)"
        case LIBUSB_SPEED_SUPER_PLUS: return "super+ (10 Gb/s)"
        default: return nil
        }
    }

    func open() throws(LibUSBError) -> LibUSBDeviceHandle {
        var handle: OpaquePointer?
        try LibUSBError.check(libusb_open(self.pointer, &handle))
        guard let handle else { throw LibUSBError.io }
        return LibUSBDeviceHandle(handle, device: self)
    }
}

/// An open device (`libusb_device_handle *`), closed in `deinit`.
///
/// `@unchecked Sendable`: the pointer is immutable; libusb allows claiming, submitting and
/// cancelling transfers on one handle from several threads; `libusb_close` runs only in
/// `deinit`, when no transfer (each holds the bridge, which holds the handle) is left.
final class LibUSBDeviceHandle: @unchecked Sendable {
    let pointer: OpaquePointer
    let device: LibUSBDevice

    init(_ pointer: OpaquePointer, device: LibUSBDevice) {
        self.pointer = pointer
        self.device = device
    }

    deinit { libusb_close(self.pointer) }

    /// Detach a kernel driver on claim and re-attach it on release (where supported).
    func setAutoDetachKernelDriver(_ enabled: Bool) {
        _ = libusb_set_auto_detach_kernel_driver(self.pointer, enabled ? 1 : 0)
    }

    func claimInterface(_ number: Int) throws(LibUSBError) {
        try LibUSBError.check(libusb_claim_interface(self.pointer, Int32(number)))
    }

    func releaseInterface(_ number: Int) {
        _ = libusb_release_interface(self.pointer, Int32(number))
    }

    func setAlternateSetting(interface: Int, setting: Int) throws(LibUSBError) {
        try LibUSBError.check(libusb_set_interface_alt_setting(self.pointer, Int32(interface), Int32(setting)))
    }

    /// A control transfer that reads up to `length` bytes (`bmRequestType` has the IN bit).
    func controlIn(
        requestType: UInt8,
        request: UInt8,
        value: UInt16,
        index: UInt16,
        length: Int,
        timeoutMilliseconds: UInt32
    ) throws(LibUSBError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: length)
        let count = try LibUSBError.check(
            libusb_control_transfer(
                self.pointer,
                requestType | 0x80,
                request,
                value,
                index,
                &buffer,
                UInt16(length),
                timeoutMilliseconds
            )
        )
        return Array(buffer.prefix(Int(count)))
    }

    /// A control transfer that sends `data` (none for a request without a data stage).
    func controlOut(
        requestType: UInt8,
        request: UInt8,
        value: UInt16,
        index: UInt16,
        data: [UInt8],
        timeoutMilliseconds: UInt32
    ) throws(LibUSBError) {
        var data = data
        let length = UInt16(data.count)
        try LibUSBError.check(
            libusb_control_transfer(
                self.pointer,
                requestType & 0x7F,
                request,
                value,
                index,
                &data,
                length,
                timeoutMilliseconds
            )
        )
    }

    /// A USB port reset (`libusb_reset_device`); the device may re-enumerate, after which this
    /// handle reports `.notFound` and the device must be found again.
    func reset() throws(LibUSBError) {
        try LibUSBError.check(libusb_reset_device(self.pointer))
    }

    func clearHalt(endpoint: UInt8) throws(LibUSBError) {
        try LibUSBError.check(libusb_clear_halt(self.pointer, endpoint))
    }

    /// A string descriptor in ASCII (`libusb_get_string_descriptor_ascii`).
    func asciiString(index: UInt8) -> String? {
        guard index != 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = libusb_get_string_descriptor_ascii(self.pointer, index, &buffer, Int32(buffer.count))
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<Int(count)], as: UTF8.self)
    }
}
