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
/// link starts) and bridges its bulk IN/OUT pair to a socketpair whose other end becomes the
/// NIO channel. Several transfers stay in flight each way.
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

        public init() {}

        /// Applies per-device quirks.
        public mutating func apply(_ quirks: USBQuirks) {
            self.transfers = quirks.applied(to: self.transfers)
            if let delay = quirks.claimDelay { self.claimDelay = delay }
            if let count = quirks.maxInterfaces { self.maxInterfaces = count }
            if let classes = quirks.interfaceClasses { self.interfaceClasses = classes }
        }
    }

    public let selector: USBDeviceSelector
    public let configuration: Configuration

    public init(selector: USBDeviceSelector, configuration: Configuration = .init()) {
        self.selector = selector
        self.configuration = configuration
    }

    public var description: String { "usb:\(self.selector)" }

    /// A USB endpoint is the same wire after a reopen: bytes of an abandoned response may still
    /// arrive. (A FunctionFS accessory drops them when the alternate setting is selected.)
    public var reopenMayCarryStaleBytes: Bool { true }

    public func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        let (handle, interface) = try self.claim()
        if self.configuration.claimDelay > .zero {
            try? await Task.sleep(for: self.configuration.claimDelay)
        }
        let (local, remote) = try SocketPairTransport.makeSocketPair()
        let name = "\(self.selector) on port \(handle.device.portPath) (\(interface))"
        let bridge = USBLinkBridge(
            handle: handle,
            interface: interface,
            policy: self.configuration.transfers,
            name: "\(self.selector)",
            socket: remote
        )
        do {
            try bridge.start()
        } catch {
            _ = close(local)
            throw error
        }
        let channel: any Channel
        do {
            channel = try await NIOPipeBootstrap(group: eventLoop)
                .channelInitializer(configure)
                .takingOwnershipOfDescriptor(inputOutput: local)
                .get()
        } catch {
            _ = close(local)
            bridge.fail(nil)
            throw TransportError(.openFailed, "could not attach \(name) to the event loop: \(error)")
        }
        let node = handle.device.deviceNode
        return OpenedByteStream(channel: channel) { await bridge.explainedFailure(deviceNode: node) }
    }

    /// Finds the device, opens it and claims the first free qualifying interface.
    func claim() throws(TransportError) -> (LibUSBDeviceHandle, USBLinkInterface) {
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
        let interfaces = criteria.qualifying(settings).prefix(max(1, self.configuration.maxInterfaces))
        guard !interfaces.isEmpty else {
            let which =
                selector.interfaceNumber.map { "interface \($0) has no bulk IN and OUT endpoint pair" }
                ?? "no interface of class \(self.configuration.interfaceClasses.map(\.description).joined(separator: ", ")) has a bulk IN and OUT endpoint pair"
            throw TransportError(
                .openFailed,
                "USB device \(selector) on port \(device.portPath): \(which); name one with ?interface=N"
            )
        }
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
            return (handle, interface)
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
