import AccessoryTransport
import NIOCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// An Android phone or tablet as an accessory, through the Android Open Accessory protocol
/// (the `aoa` device spec): each ``open(on:configure:)`` switches the device into accessory
/// mode if it is not there yet (GET_PROTOCOL, six SEND_STRINGs, START), waits for it to come
/// back as 18D1:2D00 (or 2D01, 2D04, 2D05) on the same port, and carries the link over the
/// bulk pair of its accessory interface, like ``USBTransport``.
///
/// The app on the phone that matches the accessory's strings reads and writes that pair; AOA
/// itself has no framing, so `session=on` (docs/framing.md) is what resynchronises a line that
/// a killed host left mid-response.
///
/// ```swift
/// var selector = AndroidAccessorySelector()
/// selector.identity.manufacturer = "Acme"
/// let client = AccessoryClient(transport: AndroidAccessoryTransport(selector: selector))
/// ```
public struct AndroidAccessoryTransport: ByteStreamTransport {
    /// How the transport switches and drives the device.
    public struct Configuration: Sendable, Hashable {
        /// The bulk pair's transfers, as for any USB accessory.
        public var usb = USBTransport.Configuration()
        /// How long the device may take to come back in accessory mode after START.
        /// (7 s by default: within the CLI's 10 s connect timeout, so that the timeout that ends
        /// the open is this one, with its message.)
        public var switchTimeout: Duration = .seconds(7)

        /// The defaults: `USBTransport`'s transfers, a 7 s switch timeout.
        public init() {}
    }

    /// Which phone, and the strings it is sent.
    public let selector: AndroidAccessorySelector
    /// How it is switched and driven.
    public let configuration: Configuration

    /// A transport for the phone `selector` names; nothing is opened until the link's first
    /// request.
    public init(selector: AndroidAccessorySelector, configuration: Configuration = .init()) {
        self.selector = selector
        self.configuration = configuration
    }

    /// The device spec that names this phone (`aoa:18d1:4ee7?manufacturer=…`).
    public var description: String { DeviceSpec.aoa(self.selector).description }

    /// The phone's endpoints are one wire: bytes of an abandoned response may still arrive.
    public var reopenMayCarryStaleBytes: Bool { true }
    /// The device is held by this process until the closed stream released it.
    public var reopenWaitsForRelease: Bool { true }

    /// Switches the phone into accessory mode if needed and opens its accessory interface's
    /// bulk pair.
    ///
    /// - Throws: `TransportError` (AccessoryTransport) with code `accessoryModeUnsupported` for a
    ///   device that refuses GET_PROTOCOL, `openTimedOut` for one that does not come back in
    ///   accessory mode within ``Configuration/switchTimeout``, `deviceNotFound` when no device
    ///   matches, `permissionDenied` when none that matches may be opened by this user,
    ///   `openFailed` when several devices are already in accessory mode, the switch is refused
    ///   or the open is cancelled, or what ``USBTransport`` throws.
    public func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        let target = try await self.accessoryModeDevice()
        var configuration = self.configuration.usb
        configuration.interfaceClasses = [.anyVendorSpecific]
        configuration.silentDeviceHint = self.noAppHint
        return try await USBTransport(selector: target, configuration: configuration)
            .open(on: eventLoop, configure: configure)
    }

    /// What a link that never heard from the phone adds to its error.
    var noAppHint: String {
        let uri = self.selector.identity.uri
        let offered =
            uri.isEmpty
            ? "no uri= was sent, so the phone can offer the user nothing to install"
            : "with no app, the phone offers the user \(UntrustedText.printable(uri))"
        return
            "the phone in accessory mode never answered on its accessory interface: is an app whose accessory filter matches manufacturer \"\(self.selector.identity.manufacturer)\", model \"\(self.selector.identity.model)\" and version \"\(self.selector.identity.version)\" installed, running, and allowed to use the accessory? (\(offered))"
    }

    /// The device in accessory mode: found as it is, or switched and waited for.
    func accessoryModeDevice() async throws(TransportError) -> USBDeviceSelector {
        let context: LibUSBContext
        let devices: [LibUSBDevice]
        do {
            context = try LibUSBContext()
            devices = try context.devices()
        } catch {
            throw TransportError(.openFailed, "libusb could not list USB devices: \(error)")
        }
        if let ready = try self.deviceAlreadyInAccessoryMode(devices) { return ready }
        let phone = try self.switchablePhone(devices)
        let portPath = phone.device.portPath
        let serial = phone.device.sysfsSerialNumber
        let startError: LibUSBError?
        do {
            startError = try await Self.switchRetryingOnce(phone.handle, identity: self.selector.identity)
        } catch {
            throw self.refusedSwitch(phone.id, portPath: portPath, version: phone.version, error)
        }
        if let startError, startError == .pipe {
            throw self.refusedSwitch(phone.id, portPath: portPath, version: phone.version, startError)
        }
        return try await self.waitForAccessoryMode(
            portPath: portPath,
            serial: serial,
            from: phone.id,
            startError: startError
        )
    }

    /// ``AndroidAccessoryMode/switchToAccessoryMode(_:identity:)``, once more after a short
    /// pause when a SEND_STRING fails with an I/O error: a device just plugged in may still be
    /// taking its configuration (the kernel's SET_CONFIGURATION restarts the function's control
    /// endpoint under a request in flight), which the USB guest test met once. A stall is an
    /// answer and is not retried.
    private static func switchRetryingOnce(
        _ handle: LibUSBDeviceHandle,
        identity: AndroidAccessoryIdentity
    ) async throws(LibUSBError) -> LibUSBError? {
        do {
            return try AndroidAccessoryMode.switchToAccessoryMode(handle, identity: identity)
        } catch  where error == .io {
            try? await Task.sleep(for: .milliseconds(250))
            return try AndroidAccessoryMode.switchToAccessoryMode(handle, identity: identity)
        }
    }

    private func refusedSwitch(_ id: String, portPath: String, version: Int, _ error: LibUSBError) -> TransportError {
        TransportError(
            .openFailed,
            "USB device \(id) on port \(portPath) answered GET_PROTOCOL (AOA \(version)) but refused the switch into accessory mode: \(error)"
        )
    }

    /// A device already in accessory mode that the selector allows, if there is one.
    func deviceAlreadyInAccessoryMode(_ devices: [LibUSBDevice]) throws(TransportError) -> USBDeviceSelector? {
        let ready = devices.filter { device in
            guard let descriptor = try? device.deviceDescriptor(),
                AndroidAccessoryMode.isAccessoryMode(vendorID: descriptor.idVendor, productID: descriptor.idProduct)
            else { return false }
            return self.selector.portPath.map { $0 == device.portPath } ?? true
        }
        guard let device = ready.first, let descriptor = try? device.deviceDescriptor() else { return nil }
        guard ready.count == 1 else {
            throw TransportError(
                .openFailed,
                "\(ready.count) Android devices are in accessory mode (ports \(ready.map(\.portPath).joined(separator: ", "))); choose one with ?port=…"
            )
        }
        return USBDeviceSelector(
            vendorID: descriptor.idVendor,
            productID: descriptor.idProduct,
            portPath: device.portPath,
            interfaceNumber: AndroidAccessoryMode.accessoryInterface
        )
    }

    /// The device to switch: the one the selector names, or the first that answers
    /// GET_PROTOCOL; open, with the AOA version it answered.
    func switchablePhone(
        _ devices: [LibUSBDevice]
    ) throws(TransportError) -> (device: LibUSBDevice, handle: LibUSBDeviceHandle, id: String, version: Int) {
        var refused: [String] = []
        var candidates = 0
        for device in devices {
            guard let descriptor = try? device.deviceDescriptor() else { continue }
            let id = USBDeviceSelector(vendorID: descriptor.idVendor, productID: descriptor.idProduct).description
            if let port = self.selector.portPath, device.portPath != port { continue }
            if let vendorID = self.selector.vendorID, let productID = self.selector.productID {
                guard descriptor.idVendor == vendorID, descriptor.idProduct == productID else { continue }
            } else if descriptor.bDeviceClass == 0x09 {
                continue  // a hub never is a phone
            }
            candidates += 1
            let handle: LibUSBDeviceHandle
            do {
                handle = try device.open()
            } catch {
                refused.append("\(id) on port \(device.portPath) (\(error.name))")
                continue
            }
            if let version = AndroidAccessoryMode.protocolVersion(of: handle) {
                return (device, handle, id, version)
            }
            if self.selector.vendorID != nil {
                throw TransportError(
                    .accessoryModeUnsupported,
                    "USB device \(id) on port \(device.portPath) does not support Android Open Accessory (it refused GET_PROTOCOL, vendor request 51): it is not an Android device, or its USB mode does not allow accessories; use usb:\(id) for a device that has its own bulk interface"
                )
            }
        }
        let named = self.selector.vendorID == nil ? "no USB device" : "no USB device \(self.selector)"
        let port = self.selector.portPath.map { " on port \($0)" } ?? ""
        if !refused.isEmpty {
            throw TransportError(
                .permissionDenied,
                "\(named)\(port) could be asked for Android Open Accessory: no permission to open \(refused.joined(separator: ", ")); install the udev rules with the phone's VID:PID (sudo udev/install --device VVVV:PPPP; they cover accessory mode, 18d1:2d00, already; see docs/usb.md), then replug"
            )
        }
        if candidates > 0 {
            throw TransportError(
                .accessoryModeUnsupported,
                "no USB device\(port) answers Android Open Accessory's GET_PROTOCOL (\(candidates) tried): connect an Android device, unlocked, with USB set to charge or file transfer"
            )
        }
        throw TransportError(
            .deviceNotFound,
            "\(named)\(port) is attached (see `accessory-http list`; under a VM or container, check the device is passed through)"
        )
    }

    /// Waits until a device in accessory mode appears on `portPath` (or with `serial`);
    /// `startError` (START failed other than by a stall) is named if it never does.
    func waitForAccessoryMode(
        portPath: String,
        serial: String?,
        from id: String,
        startError: LibUSBError? = nil
    ) async throws(TransportError) -> USBDeviceSelector {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: self.configuration.switchTimeout)
        while clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(100))
            if Task.isCancelled {
                throw TransportError(.openFailed, "cancelled while \(id) switched into accessory mode")
            }
            guard let context = try? LibUSBContext(), let devices = try? context.devices() else { continue }
            for device in devices {
                guard let descriptor = try? device.deviceDescriptor(),
                    AndroidAccessoryMode.isAccessoryMode(vendorID: descriptor.idVendor, productID: descriptor.idProduct)
                else { continue }
                let samePort = device.portPath == portPath
                let sameSerial = serial != nil && device.sysfsSerialNumber == serial
                guard samePort || sameSerial else { continue }
                // The node appears a moment after the device is listed (udev sets its mode).
                guard access(device.deviceNode, F_OK) == 0 else { continue }
                return USBDeviceSelector(
                    vendorID: descriptor.idVendor,
                    productID: descriptor.idProduct,
                    portPath: device.portPath,
                    interfaceNumber: AndroidAccessoryMode.accessoryInterface
                )
            }
        }
        let sent =
            startError.map { "was sent START (which failed: \($0))" } ?? "accepted the switch into accessory mode"
        throw TransportError(
            .openTimedOut,
            "USB device \(id) on port \(portPath) \(sent) but did not come back in accessory mode (18d1:2d00, 2d01, 2d04 or 2d05) within \(self.configuration.switchTimeout) (unlock the phone and try again; some phones need the USB mode set to file transfer)"
        )
    }
}
