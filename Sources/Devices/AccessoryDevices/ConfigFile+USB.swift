import AccessoryTransport
import AccessoryUSB

/// USB quirks in the config file: a `[usb VID:PID]` line starts a section whose `key = value`
/// lines set ``USBQuirks`` for that device, until the next section.
///
/// ```
/// [usb 1209:0001]
/// zlp = off
/// max-transfer-size = 8192
/// ```
extension ConfigFile {
    /// Parses `[usb VID:PID]` into the normalised `vvvv:pppp` key.
    static func usbSection(_ line: String, at location: String) throws(ConfigFileError) -> String {
        guard line.hasSuffix("]") else {
            throw ConfigFileError(.invalidSection, "\(location): a section line must end with ']', found \"\(line)\"")
        }
        let inner = String(line.dropFirst().dropLast()).trimmingSpaces()
        let words = inner.split(separator: " ", omittingEmptySubsequences: true)
        guard words.count == 2, words[0] == "usb",
            case .usb(let selector)? = (try? DeviceSpec(parsing: "usb:\(words[1])"))?.kind
        else {
            throw ConfigFileError(
                .invalidSection,
                "\(location): expected a section '[usb VID:PID]' with IDs in 4 hex digits (e.g. [usb 1209:0001]), found \"\(line)\""
            )
        }
        return selector.description
    }

    mutating func setUSBQuirk(_ key: String, _ value: String, device: String, at location: String)
        throws(ConfigFileError)
    {
        var quirks = self.usbQuirks[device] ?? USBQuirks()
        do {
            try quirks.set(key, to: value)
        } catch {
            throw ConfigFileError(.invalidValue, "\(location): [usb \(device)]: \(error.message)")
        }
        self.usbQuirks[device] = quirks
    }
}
