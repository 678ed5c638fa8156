import AccessoryFunctionFS
import AccessoryTransport
import AccessoryUSB
import NIOCore
import NIOPosix
import Testing

/// On machines without USB (CI), opening fails quickly with a clear error, never hangs.
@Suite("USB transports without USB")
struct USBTransportErrorTests {
    @Test func aMissingDeviceIsAClearError() async {
        let transport = USBTransport(
            selector: USBDeviceSelector(vendorID: 0x1209, productID: 0xFFFE, serialNumber: "none")
        )
        #expect(transport.reopenMayCarryStaleBytes)
        #expect(transport.description == "usb:1209:fffe")
        do {
            _ = try await transport.open(on: MultiThreadedEventLoopGroup.singleton.next()) {
                $0.eventLoop.makeSucceededVoidFuture()
            }
            Issue.record("opened a device that does not exist")
        } catch let error as TransportError {
            #expect(error.code == .deviceNotFound || error.code == .openFailed)
            #expect(error.message.contains("1209:fffe") || error.message.contains("libusb"))
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    /// `aoa` without a phone: the error says no device (or libusb's trouble), never hangs.
    /// (The switch itself is tested in the USB VM, scripts/usb-vm-guest-aoa.)
    @Test(arguments: ["aoa", "aoa:18d1:fffe?port=9-9"])
    func aMissingAndroidDeviceIsAClearError(spec: String) async throws {
        guard case .aoa(let selector) = try DeviceSpec(parsing: spec).kind else {
            Issue.record("\(spec) is not an aoa spec")
            return
        }
        let transport = AndroidAccessoryTransport(selector: selector)
        #expect(transport.reopenMayCarryStaleBytes)
        #expect(transport.description == spec)
        do {
            _ = try await transport.open(on: MultiThreadedEventLoopGroup.singleton.next()) {
                $0.eventLoop.makeSucceededVoidFuture()
            }
            Issue.record("opened an Android device that does not exist")
        } catch let error as TransportError {
            #expect([.deviceNotFound, .openFailed, .accessoryModeUnsupported].contains(error.code), "\(error)")
            #expect(error.message.contains("no USB device") || error.message.contains("libusb"), "\(error)")
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    @Test func aMissingFunctionFSMountIsAClearError() async {
        let transport = FunctionFSTransport(directory: "/nonexistent/ffs-accessory")
        do {
            _ = try await transport.open(on: MultiThreadedEventLoopGroup.singleton.next()) {
                $0.eventLoop.makeSucceededVoidFuture()
            }
            Issue.record("opened a FunctionFS function that does not exist")
        } catch let error as TransportError {
            #expect(error.code == .deviceNotFound)
            #expect(error.message.contains("/nonexistent/ffs-accessory/ep0"))
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }
}
