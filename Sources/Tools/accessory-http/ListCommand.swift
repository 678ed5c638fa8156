import AccessoryUSB
import ArgumentParser

/// `accessory-http list`: the USB accessories attached.
struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List attached USB accessories: VID:PID, serial, port, qualifying interfaces, access.",
        discussion: """
            A device is listed when an interface of class ff (vendor-specific) or 07/01/04 (IPP over \
            USB) has a bulk IN and a bulk OUT endpoint. When the current user may not open it, the \
            hint names the udev rule to install (docs/usb.md).
            """
    )
    @Flag(name: .long, help: "Print a JSON array instead of text.") var json = false
    @Flag(name: .long, help: "List every USB device, also those without a qualifying interface.") var all = false

    func run() async throws {
        let (json, all) = (self.json, self.all)
        try await runReportingErrors {
            let accessories: [USBAccessoryInfo]
            do {
                accessories = try USBAccessoryListing.scan(all: all)
            } catch {
                throw CLIError(
                    .transport,
                    "cannot list USB devices: \(error) (is usbfs available? under a container, pass /dev/bus/usb through)"
                )
            }
            try StandardOutput.write(
                json ? USBAccessoryListing.renderJSON(accessories) : USBAccessoryListing.renderText(accessories)
            )
        }
    }
}
