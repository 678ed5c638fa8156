import AccessoryTransport
import CLibUSB
import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A USB accessory's bulk endpoints as a byte stream pair, through libusb-1.0.
///
/// Each ``open(on:configure:)`` finds the device (by VID:PID, and serial number or port path if
/// given), picks a qualifying interface, detaches its kernel driver (re-attached on release),
/// claims it, selects its alternate setting (which also tells a FunctionFS accessory that a new
/// link starts) and carries its bulk IN/OUT pair as a NIO channel of its own (`USBBulkChannel`):
/// writes are copied into OUT transfers and completed IN transfers become reads on the event
/// loop. Several transfers stay in flight each way.
///
/// When a device has several qualifying interfaces (the IPP-over-USB model), concurrent opens
/// each claim a different one, up to ``Configuration/maxInterfaces``: the transport is a pool
/// of independent HTTP/1.1 links.
///
/// ```swift
/// let transport = USBTransport(selector: USBDeviceSelector(vendorID: 0x1209, productID: 0x0001))
/// let client = AccessoryClient(transport: transport)
/// ```
public struct USBTransport: ByteStreamTransport {
    /// How the transport finds and drives the device.
    public struct Configuration: Sendable, Hashable {
        /// Which interfaces qualify when the selector names none.
        public var interfaceClasses: [USBInterfaceClass] = USBInterfaceCriteria.defaultClasses
        /// Transfer sizes, transfers in flight, ZLP and write timeout.
        public var transfers = USBTransferPolicy()
        /// How long to wait after claiming, for devices that need time (none by default).
        public var claimDelay: Duration = .zero
        /// Use at most this many qualifying interfaces (all by default).
        public var maxInterfaces: Int = 32
        /// Reset the device's port (`libusb_reset_device`) before claiming it, for devices that
        /// stop answering after power save (`reset-on-open`; ipp-usb's `init-reset`).
        public var resetOnOpen = false
        /// How long to wait after opening (and resetting) the device before claiming it
        /// (`init-delay`), for devices that need time to start.
        public var initDelay: Duration = .zero
        /// What a link's failure report adds when the device never sent a byte on it (the
        /// Android accessory transport says that the phone may lack the app).
        var silentDeviceHint: String?

        /// The defaults: ``USBInterfaceCriteria/defaultClasses``, ``USBTransferPolicy``'s defaults,
        /// no delays, no reset, and at most 32 interfaces.
        public init() {}

        /// Applies per-device quirks.
        public mutating func apply(_ quirks: USBQuirks) {
            self.transfers = quirks.applied(to: self.transfers)
            if let delay = quirks.claimDelay { self.claimDelay = delay }
            if let count = quirks.maxInterfaces { self.maxInterfaces = count }
            if let classes = quirks.interfaceClasses { self.interfaceClasses = classes }
            if let reset = quirks.resetOnOpen { self.resetOnOpen = reset }
            if let delay = quirks.initDelay { self.initDelay = delay }
        }
    }

    /// Which device to open (VID:PID, optionally serial number, port path and interface).
    public let selector: USBDeviceSelector
    /// How the device is found and driven.
    public let configuration: Configuration

    /// A transport for the device `selector` names; nothing is opened until
    /// ``open(on:configure:)``.
    ///
    /// - Parameters:
    ///   - selector: The device's VID:PID, optionally narrowed to a serial number, a port path and
    ///     an interface (`USBDeviceSelector`, AccessoryTransport).
    ///   - configuration: Interface classes, transfers, delays and reset (``Configuration/init()``'s
    ///     defaults if omitted).
    public init(selector: USBDeviceSelector, configuration: Configuration = .init()) {
        self.selector = selector
        self.configuration = configuration
    }

    public var description: String { "usb:\(self.selector)" }

    /// A USB endpoint is the same wire after a reopen: bytes of an abandoned response may still
    /// arrive. (A FunctionFS accessory drops them when the alternate setting is selected.)
    public var reopenMayCarryStaleBytes: Bool { true }
    /// The device is held by this process until the closed stream released it.
    public var reopenWaitsForRelease: Bool { true }

    public func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        var (handle, interfaces) = try self.openDevice()
        if self.configuration.resetOnOpen {
            handle = try await self.reset(handle)
            interfaces = try self.qualifyingInterfaces(of: handle.device)
        }
        if self.configuration.initDelay > .zero {
            try? await Task.sleep(for: self.configuration.initDelay)
        }
        let interface = try self.claimFirstFree(of: interfaces, on: handle)
        if self.configuration.claimDelay > .zero {
            try? await Task.sleep(for: self.configuration.claimDelay)
        }
        let name = "\(self.selector) on port \(handle.device.portPath) (\(interface))"
        let released = eventLoop.makePromise(of: Void.self)
        let bridge = USBLinkBridge(
            handle: handle,
            interface: interface,
            policy: self.configuration.transfers,
            name: "\(self.selector)",
            onReleased: { released.succeed(()) }
        )
        let channel = USBBulkChannel(eventLoop: eventLoop, bridge: bridge)
        do {
            try bridge.start(sink: channel)
        } catch {
            channel.close(promise: nil)  // its close future is owed, even unused
            throw error
        }
        do {
            // The pipeline is complete before the channel is active: no byte is read before.
            try await eventLoop.flatSubmit {
                configure(channel).map { channel.activate() }
            }.get()
        } catch {
            channel.close(promise: nil)  // ends the bridge, which releases the interface
            throw TransportError(.openFailed, "could not set up the pipeline on \(name): \(error)")
        }
        let node = handle.device.deviceNode
        let hint = self.configuration.silentDeviceHint
        return OpenedByteStream(
            channel: channel,
            diagnostics: {
                let failure = await bridge.explainedFailure(deviceNode: node)
                guard let hint, bridge.receivedNothing else { return failure }
                return failure.map { "\($0); \(hint)" } ?? hint
            },
            // The channel's close ends the bridge at once; its event thread releases the
            // interface once the last transfer is back (or gives up on one after 5 s), and a
            // reopen must not find it still claimed.
            released: { try? await released.futureResult.get() },
            // What the device has not taken: the bytes in OUT transfers not back yet (the
            // channel's own buffer is `bufferedWritableBytes`).
            sendQueue: KernelSendQueue(counting: { bridge.outputBytesInFlight }),
            endCause: { bridge.endCause }
        )
    }

    /// How many links the device can carry at once: its qualifying interfaces (at most
    /// ``Configuration/maxInterfaces``), each claimed by one open. 1 when the selector names an
    /// interface, or when the device cannot be looked at now (not attached, not accessible).
    public func concurrentLinks() -> Int {
        guard self.selector.interfaceNumber == nil, let device = try? self.findDevice(),
            let interfaces = try? self.qualifyingInterfaces(of: device)
        else { return 1 }
        return max(1, interfaces.count)
    }

    /// Finds the device and opens it; returns its qualifying interfaces too.
    func openDevice() throws(TransportError) -> (LibUSBDeviceHandle, [USBLinkInterface]) {
        let device = try self.findDevice()
        let interfaces = try self.qualifyingInterfaces(of: device)
        return (try self.open(device), interfaces)
    }

    /// Finds the one attached device the selector names.
    func findDevice() throws(TransportError) -> LibUSBDevice {
        let context: LibUSBContext
        do {
            context = try LibUSBContext()
        } catch {
            throw TransportError(.openFailed, "libusb could not start: \(error)")
        }
        let devices: [LibUSBDevice]
        do {
            devices = try context.devices()
        } catch {
            throw TransportError(.openFailed, "libusb could not list USB devices: \(error)")
        }
        let selector = self.selector
        let matching = devices.filter { device in
            guard let descriptor = try? device.deviceDescriptor(),
                descriptor.idVendor == selector.vendorID, descriptor.idProduct == selector.productID
            else { return false }
            if let port = selector.portPath, device.portPath != port { return false }
            if let serial = selector.serialNumber {
                let actual =
                    device.sysfsSerialNumber
                    ?? (try? device.open()).flatMap { $0.asciiString(index: descriptor.iSerialNumber) }
                if actual != serial { return false }
            }
            return true
        }
        guard let device = matching.first else {
            var narrowing = ""
            if let serial = selector.serialNumber { narrowing += " with serial number \(serial)" }
            if let port = selector.portPath { narrowing += " on port \(port)" }
            throw TransportError(
                .deviceNotFound,
                "no USB device \(selector)\(narrowing) is attached (see `accessory-http list`; under a VM or container, check the device is passed through)"
            )
        }
        guard matching.count == 1 else {
            let ports = matching.map { "port=\($0.portPath)" + ($0.sysfsSerialNumber.map { " serial=\($0)" } ?? "") }
            throw TransportError(
                .openFailed,
                "\(matching.count) USB devices \(selector) are attached (\(ports.joined(separator: ", "))); choose one with ?serial=… or ?port=…"
            )
        }
        return device
    }

    /// The interfaces of `device` that can carry the link, in the order they are tried.
    func qualifyingInterfaces(of device: LibUSBDevice) throws(TransportError) -> [USBLinkInterface] {
        let selector = self.selector
        let settings: [USBInterfaceDescription]
        do {
            settings = try device.activeInterfaces()
        } catch {
            throw TransportError(.openFailed, "could not read the configuration of USB device \(selector): \(error)")
        }
        let criteria = USBInterfaceCriteria(
            interfaceNumber: selector.interfaceNumber,
            classes: self.configuration.interfaceClasses
        )
        let interfaces = Array(criteria.qualifying(settings).prefix(max(1, self.configuration.maxInterfaces)))
        guard !interfaces.isEmpty else {
            let which =
                selector.interfaceNumber.map { "interface \($0) has no bulk IN and OUT endpoint pair" }
                ?? "no interface of class \(self.configuration.interfaceClasses.map(\.description).joined(separator: ", ")) has a bulk IN and OUT endpoint pair"
            throw TransportError(
                .openFailed,
                "USB device \(selector) on port \(device.portPath): \(which); name one with ?interface=N"
            )
        }
        return interfaces
    }

    /// Opens `device`, with messages that say how to get permission.
    func open(_ device: LibUSBDevice) throws(TransportError) -> LibUSBDeviceHandle {
        let selector = self.selector
        let handle: LibUSBDeviceHandle
        do {
            handle = try device.open()
        } catch let error where error == .access {
            throw TransportError(
                .permissionDenied,
                "no permission to open USB device \(selector) (\(device.deviceNode)): install the udev rules with its VID:PID (sudo udev/install --device VVVV:PPPP; see docs/usb.md), then replug the device"
            )
        } catch let error where error == .noDevice {
            throw TransportError(.deviceNotFound, "USB device \(selector) went away while opening it")
        } catch {
            throw TransportError(.openFailed, "could not open USB device \(selector) (\(device.deviceNode)): \(error)")
        }
        handle.setAutoDetachKernelDriver(true)
        return handle
    }

    /// Resets the device's port (`reset-on-open`). A device whose descriptors changed
    /// re-enumerates: it is then found again (for up to two seconds) and opened anew.
    func reset(_ handle: LibUSBDeviceHandle) async throws(TransportError) -> LibUSBDeviceHandle {
        do {
            try handle.reset()
            return handle
        } catch  where error == .notFound || error == .noDevice {
            // Re-enumerated: the old handle is dead; look for the device again.
        } catch {
            throw TransportError(.openFailed, "could not reset USB device \(self.selector) (reset-on-open): \(error)")
        }
        var lastError: TransportError?
        for _ in 0..<40 {
            try? await Task.sleep(for: .milliseconds(50))
            do {
                return try self.open(self.findDevice())
            } catch {
                lastError = error
            }
        }
        throw lastError
            ?? TransportError(.deviceNotFound, "USB device \(self.selector) did not come back after its reset")
    }

    /// Claims the first interface of `interfaces` that no one else holds, and selects its
    /// alternate setting.
    func claimFirstFree(
        of interfaces: [USBLinkInterface],
        on handle: LibUSBDeviceHandle
    ) throws(TransportError) -> USBLinkInterface {
        let selector = self.selector
        let device = handle.device
        var lastError: LibUSBError?
        for interface in interfaces {
            do {
                try handle.claimInterface(interface.interfaceNumber)
            } catch {
                lastError = error
                if error == .busy { continue }
                break
            }
            do {
                try handle.setAlternateSetting(
                    interface: interface.interfaceNumber,
                    setting: interface.alternateSetting
                )
            } catch {
                handle.releaseInterface(interface.interfaceNumber)
                throw TransportError(.openFailed, "could not select \(interface) of USB device \(selector): \(error)")
            }
            return interface
        }
        if lastError == .busy {
            throw TransportError(
                .deviceBusy,
                "every qualifying interface of USB device \(selector) is claimed (by another program, or by this one's other links); close the other program or raise max-interfaces"
            )
        }
        if lastError == .access {
            throw TransportError(
                .permissionDenied,
                "no permission to claim USB device \(selector) (\(device.deviceNode)): install the udev rules with its VID:PID (sudo udev/install --device VVVV:PPPP; see docs/usb.md)"
            )
        }
        throw TransportError(
            .openFailed,
            "could not claim an interface of USB device \(selector): \(lastError.map(\.description) ?? "unknown error")"
        )
    }
}
