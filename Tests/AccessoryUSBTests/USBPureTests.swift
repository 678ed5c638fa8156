import AccessoryFunctionFS
import AccessoryTransport
import Foundation
import Testing

@testable import AccessoryUSB

@Suite("USB interface selection")
struct USBInterfaceSelectionTests {
    static let bulkIn = USBEndpointDescription(address: 0x81, attributes: 2, maxPacketSize: 512)
    static let bulkOut = USBEndpointDescription(address: 0x02, attributes: 2, maxPacketSize: 512)
    static let interruptIn = USBEndpointDescription(address: 0x83, attributes: 3, maxPacketSize: 8)

    static func setting(
        _ number: Int,
        alt: Int = 0,
        _ code: (UInt8, UInt8, UInt8),
        _ endpoints: [USBEndpointDescription]
    ) -> USBInterfaceDescription {
        USBInterfaceDescription(
            interfaceNumber: number,
            alternateSetting: alt,
            classCode: code.0,
            subclass: code.1,
            protocolCode: code.2,
            endpoints: endpoints
        )
    }

    @Test func picksVendorAndIPPInterfacesWithABulkPair() {
        let settings = [
            Self.setting(0, (0x02, 0x02, 0x01), [Self.interruptIn]),  // CDC control: not bulk
            Self.setting(1, (0x07, 0x01, 0x02), [Self.bulkIn, Self.bulkOut]),  // printer, not IPP
            Self.setting(2, (0x07, 0x01, 0x04), [Self.bulkIn, Self.bulkOut]),
            Self.setting(3, (0xFF, 0x48, 0x01), [Self.bulkOut, Self.interruptIn, Self.bulkIn]),
        ]
        let chosen = USBInterfaceCriteria().qualifying(settings)
        #expect(chosen.map(\.interfaceNumber) == [2, 3])
        #expect(chosen.last?.input.address == 0x81)
        #expect(chosen.last?.output.address == 0x02)
        #expect(chosen.last?.interfaceClass == USBInterfaceClass(classCode: 0xFF, subclass: 0x48, protocolCode: 0x01))
    }

    @Test func lowestAlternateSettingWithABulkPairWins() {
        let settings = [
            Self.setting(0, alt: 1, (0xFF, 0, 0), [Self.bulkIn, Self.bulkOut]),
            Self.setting(0, alt: 0, (0xFF, 0, 0), []),
            Self.setting(0, alt: 2, (0xFF, 0, 0), [Self.bulkIn, Self.bulkOut]),
        ]
        let chosen = USBInterfaceCriteria().qualifying(settings)
        #expect(chosen.count == 1)
        #expect(chosen.first?.alternateSetting == 1)
    }

    @Test func anInterfaceNumberOverridesTheClass() {
        let settings = [
            Self.setting(0, (0x0A, 0x00, 0x00), [Self.bulkIn, Self.bulkOut]),  // CDC data
            Self.setting(1, (0xFF, 0x00, 0x00), [Self.bulkIn, Self.bulkOut]),
        ]
        #expect(USBInterfaceCriteria(interfaceNumber: 0).qualifying(settings).map(\.interfaceNumber) == [0])
        #expect(USBInterfaceCriteria().qualifying(settings).map(\.interfaceNumber) == [1])
        #expect(USBInterfaceCriteria(interfaceNumber: 5).qualifying(settings).isEmpty)
    }

    @Test func configuredClassesNarrowTheChoice() {
        let settings = [
            Self.setting(0, (0xFF, 0x42, 0x01), [Self.bulkIn, Self.bulkOut]),
            Self.setting(1, (0xFF, 0x48, 0x01), [Self.bulkIn, Self.bulkOut]),
        ]
        #expect(USBInterfaceCriteria(classes: [.accessoryHTTP]).qualifying(settings).map(\.interfaceNumber) == [1])
    }

    @Test func interfaceClassesParseAndPrint() {
        #expect(USBInterfaceClass(parsing: "ff/48/01") == .accessoryHTTP)
        #expect(USBInterfaceClass(parsing: "7/1/4") == .ippOverUSB)
        #expect(USBInterfaceClass(parsing: "ff/*/*") == .anyVendorSpecific)
        #expect(USBInterfaceClass.anyVendorSpecific.description == "ff/*/*")
        #expect(USBInterfaceClass(parsing: "ff/48") == nil)
        #expect(USBInterfaceClass(parsing: "fff/48/01") == nil)
        #expect(USBInterfaceClass(parsing: "zz/48/01") == nil)
        #expect(USBInterfaceClass(parsing: "") == nil)
    }
}

@Suite("USB transfer policy")
struct USBTransferPolicyTests {
    @Test func transferSizesAreWholePackets() {
        let policy = USBTransferPolicy()
        #expect(policy.transferSize(maxPacketSize: 512) == 16384)
        #expect(policy.transferSize(maxPacketSize: 1024) == 16384)
        #expect(policy.transferSize(maxPacketSize: 64) == 16384)
        #expect(USBTransferPolicy(maxTransferSize: 10000).transferSize(maxPacketSize: 512) == 9728)
        #expect(USBTransferPolicy(maxTransferSize: 100).transferSize(maxPacketSize: 512) == 512)
        #expect(USBTransferPolicy(maxTransferSize: 1500).transferSize(maxPacketSize: 0) == 1024)
    }

    @Test func zeroLengthPacketAfterWholePackets() {
        let policy = USBTransferPolicy()
        #expect(policy.needsZeroLengthPacket(afterWriting: 512, maxPacketSize: 512))
        #expect(policy.needsZeroLengthPacket(afterWriting: 16384, maxPacketSize: 512))
        #expect(!policy.needsZeroLengthPacket(afterWriting: 513, maxPacketSize: 512))
        #expect(!policy.needsZeroLengthPacket(afterWriting: 0, maxPacketSize: 512))
        #expect(!policy.needsZeroLengthPacket(afterWriting: 512, maxPacketSize: 0))
        #expect(
            !USBTransferPolicy(zeroLengthPackets: false).needsZeroLengthPacket(afterWriting: 1024, maxPacketSize: 512)
        )
        // More bytes already waiting continue the device's read: no ZLP cuts it short.
        #expect(!policy.needsZeroLengthPacket(afterWriting: 16384, maxPacketSize: 512, moreBytesWaiting: true))
        #expect(policy.needsZeroLengthPacket(afterWriting: 16384, maxPacketSize: 512, moreBytesWaiting: false))
        #expect(functionFSNeedsZeroLengthPacket(afterWriting: 1024, maxPacketSize: 1024))
        #expect(!functionFSNeedsZeroLengthPacket(afterWriting: 1000, maxPacketSize: 512))
    }

    @Test func zeroLengthReadsBackOff() {
        #expect(USBTransferPolicy.zeroLengthReadDelay(consecutive: 1) == 0)  // a ZLP ending a transfer
        #expect(USBTransferPolicy.zeroLengthReadDelay(consecutive: 2) == 10)
        #expect(USBTransferPolicy.zeroLengthReadDelay(consecutive: 3) == 12)
        #expect(USBTransferPolicy.zeroLengthReadDelay(consecutive: 100) == 1000)
        let delays = (1...60).map(USBTransferPolicy.zeroLengthReadDelay(consecutive:))
        #expect(delays == delays.sorted())
    }
}

@Suite("USB quirks")
struct USBQuirksTests {
    @Test func everyKeyParses() throws {
        var quirks = USBQuirks()
        try quirks.set("zlp", to: "off")
        try quirks.set("max-transfer-size", to: "8192")
        try quirks.set("claim-delay", to: "0.5")
        try quirks.set("title-case-headers", to: "yes")
        try quirks.set("max-interfaces", to: "2")
        try quirks.set("interface-class", to: "ff/48/01, 07/01/04")
        try quirks.set("reset-on-open", to: "yes")
        try quirks.set("init-delay", to: "0.25")
        try quirks.set("transfers-in-flight", to: "12")
        try quirks.set("write-timeout", to: "2.5")
        #expect(quirks.writeTimeout == .milliseconds(2500))
        #expect(quirks.resetOnOpen == true)
        #expect(quirks.initDelay == .milliseconds(250))
        #expect(quirks.zeroLengthPackets == false)
        #expect(quirks.maxTransferSize == 8192)
        #expect(quirks.claimDelay == .milliseconds(500))
        #expect(quirks.titleCaseHeaderNames == true)
        #expect(quirks.maxInterfaces == 2)
        #expect(quirks.interfaceClasses == [.accessoryHTTP, .ippOverUSB])

        var configuration = USBTransport.Configuration()
        configuration.apply(quirks)
        #expect(configuration.transfers.zeroLengthPackets == false)
        #expect(configuration.transfers.maxTransferSize == 8192)
        #expect(configuration.claimDelay == .milliseconds(500))
        #expect(configuration.maxInterfaces == 2)
        #expect(configuration.resetOnOpen)
        #expect(configuration.initDelay == .milliseconds(250))
        #expect(configuration.transfers.transfersInFlight == 12)
        #expect(configuration.transfers.writeTimeoutMilliseconds == 2500)

        var never = USBQuirks()
        try never.set("write-timeout", to: "0")
        #expect(never.applied(to: USBTransferPolicy()).writeTimeoutMilliseconds == 0)
        #expect(USBQuirks().applied(to: USBTransferPolicy()).writeTimeoutMilliseconds == 30_000)
        // Shorter than a millisecond is the shortest timeout, not "never"; out-of-range values
        // set through the property are clamped.
        var tiny = USBQuirks()
        try tiny.set("write-timeout", to: "0.0001")
        #expect(tiny.applied(to: USBTransferPolicy()).writeTimeoutMilliseconds == 1)
        var odd = USBQuirks()
        odd.writeTimeout = .seconds(-5)
        #expect(odd.applied(to: USBTransferPolicy()).writeTimeoutMilliseconds == 0)
        odd.writeTimeout = .seconds(Int64.max)
        #expect(odd.applied(to: USBTransferPolicy()).writeTimeoutMilliseconds == .max)
        odd.writeTimeout = .seconds(3600)
        #expect(odd.applied(to: USBTransferPolicy()).writeTimeoutMilliseconds == 3_600_000)
    }

    @Test func badValuesAreErrorsThatNameTheKey() {
        var quirks = USBQuirks()
        let bad = [
            ("zlp", "maybe"), ("max-transfer-size", "12"), ("max-transfer-size", "١٠٠"), ("claim-delay", "-1"),
            ("init-delay", "61"), ("init-delay", "nan"), ("reset-on-open", "2"), ("transfers-in-flight", "0"),
            ("transfers-in-flight", "33"), ("write-timeout", "-1"), ("write-timeout", "3601"), ("write-timeout", "inf"),
            ("max-interfaces", "0"), ("interface-class", "ff"), ("speed", "fast"),
        ]
        for (key, value) in bad {
            do {
                try quirks.set(key, to: value)
                Issue.record("\(key) = \(value) was accepted")
            } catch {
                #expect(error.message.contains(key))
            }
        }
        #expect(quirks == USBQuirks())
    }
}

@Suite("FunctionFS descriptors")
struct FunctionFSDescriptorTests {
    static func le32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 | UInt32(bytes[offset + $1]) << (8 * UInt32($1)) }
    }

    @Test func descriptorBlobHasTheV2HeaderAndThreeSpeeds() {
        let blob = FunctionFSDescriptors().descriptorBlob
        #expect(Self.le32(blob, 0) == 3)  // FUNCTIONFS_DESCRIPTORS_MAGIC_V2
        #expect(Self.le32(blob, 4) == UInt32(blob.count))
        #expect(Self.le32(blob, 8) == 7)  // FS | HS | SS
        #expect([Self.le32(blob, 12), Self.le32(blob, 16), Self.le32(blob, 20)] == [3, 3, 5])
        // Walk the descriptors: every bLength adds up and the counts match.
        var offset = 24
        var types: [UInt8] = []
        while offset < blob.count {
            let length = Int(blob[offset])
            #expect(length > 0)
            types.append(blob[offset + 1])
            offset += max(length, 1)
        }
        #expect(offset == blob.count)
        #expect(types == [4, 5, 5, 4, 5, 5, 4, 5, 0x30, 5, 0x30])
        // The high-speed interface and its endpoints: ff/48/01, IN 0x81 and OUT 0x02 of 512 bytes.
        let high = Array(blob[(24 + 23)..<(24 + 46)])
        #expect(
            high == [9, 4, 0, 0, 2, 0xFF, 0x48, 0x01, 1, 7, 5, 0x81, 2, 0x00, 0x02, 0, 7, 5, 0x02, 2, 0x00, 0x02, 0]
        )
    }

    @Test func stringsBlobCarriesOneUSEnglishString() {
        let blob = FunctionFSDescriptors(interfaceName: "acc").stringsBlob
        #expect(Self.le32(blob, 0) == 2)
        #expect(Self.le32(blob, 4) == UInt32(blob.count))
        #expect(Self.le32(blob, 8) == 1)
        #expect(Self.le32(blob, 12) == 1)
        #expect(Array(blob[16...]) == [0x09, 0x04, 0x61, 0x63, 0x63, 0])
    }

    @Test func eventsDecode() {
        var bytes = [UInt8](repeating: 0, count: 12 * 3 + 5)
        bytes[8] = 2  // enable
        bytes[12 + 8] = 4  // setup
        bytes[12] = 0xC0
        bytes[24 + 8] = 99  // unknown
        let events = FunctionFSEvent.decode(bytes[...])
        #expect(events.map(\.kind) == [.enable, .setup, nil])
        #expect(events.dropFirst().first?.requestType == 0xC0)
    }
}

@Suite("accessory-http list rendering")
struct USBListingTests {
    static let info = USBAccessoryInfo(
        vendorID: 0x1209,
        productID: 0x0001,
        serialNumber: "A\"1",
        portPath: "1-2.3",
        deviceNode: "/dev/bus/usb/001/004",
        interfaces: [
            USBLinkInterface(
                interfaceNumber: 0,
                alternateSetting: 0,
                interfaceClass: .accessoryHTTP,
                input: USBEndpointDescription(address: 0x81, attributes: 2, maxPacketSize: 512),
                output: USBEndpointDescription(address: 0x02, attributes: 2, maxPacketSize: 512)
            )
        ],
        accessible: false
    )

    @Test func jsonIsStableAndEscaped() {
        let json = USBAccessoryListing.renderJSON([Self.info])
        #expect(
            json.hasPrefix(
                #"[{"id":"1209:0001","vendorID":4617,"productID":1,"serialNumber":"A\"1","port":"1-2.3","deviceNode":"/dev/bus/usb/001/004","spec":"usb:1209:0001?serial=A\"1","accessible":false,"hint":"no permission to open /dev/bus/usb/001/004"#
            )
        )
        #expect(
            json.hasSuffix(
                #""interfaces":[{"number":0,"alternateSetting":0,"class":"ff/48/01","in":129,"out":2,"maxPacketSize":512}]}]"#
                    + "\n"
            )
        )
        #expect(USBAccessoryListing.renderJSON([]) == "[]\n")
    }

    /// A device chooses its serial number: control characters (ESC, newline, C1 CSI) and bidi
    /// overrides in it are escaped in both forms, and it is not offered in a device spec.
    @Test func deviceSuppliedStringsAreEscaped() throws {
        var info = Self.info
        info.serialNumber = "EVIL\u{1B}[8m\nfake line\u{9B}2J\u{202E}"
        let text = USBAccessoryListing.renderText([info])
        #expect(!text.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x9B || $0.value == 0x202E })
        #expect(text.contains(#"serial EVIL\x1B[8m\x0Afake line\u{009B}2J\u{202E}  /dev/bus/usb/001/004"#), "\(text)")
        #expect(!text.contains("\nfake line"))
        #expect(info.deviceSpec == "usb:1209:0001?port=1-2.3")

        let json = USBAccessoryListing.renderJSON([info])
        #expect(json.split(separator: "\n").count == 1, "\(json)")
        #expect(json.contains(#""serialNumber":"EVIL\u001b[8m\nfake line\u009b2J\u202e""#), "\(json)")
        let decoded = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]]
        #expect(decoded?.first?["serialNumber"] as? String == info.serialNumber)
    }

    /// Android devices: the spec `aoa` uses, and what both forms say about them.
    @Test func androidDevicesAreListedWithTheirAOASpec() throws {
        var phone = Self.info
        phone.vendorID = 0x18D1
        phone.productID = 0x4EE7
        phone.interfaces = []
        phone.speed = "high (480 Mb/s)"
        phone.android = .switchable(protocolVersion: 2)
        #expect(phone.deviceSpec == "aoa:18d1:4ee7?port=1-2.3")
        #expect(USBAccessoryListing.renderText([phone]).contains("Android device (AOA 2): aoa switches it"))
        var json = USBAccessoryListing.renderJSON([phone])
        #expect(
            json.contains(#""speed":"high (480 Mb/s)","android":{"accessoryMode":false,"protocol":2},"inUse":[]"#),
            "\(json)"
        )

        var accessory = Self.info
        accessory.productID = 0x2D00
        accessory.vendorID = 0x18D1
        accessory.android = .accessoryMode
        accessory.interfacesInUse = [0]
        #expect(accessory.deviceSpec == "aoa?port=1-2.3")
        #expect(USBAccessoryListing.renderText([accessory]).contains("(in use by a program)"))
        json = USBAccessoryListing.renderJSON([accessory])
        #expect(json.contains(#""android":{"accessoryMode":true,"protocol":null},"inUse":[0]"#), "\(json)")
        let decoded = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]]
        #expect(decoded?.first?["spec"] as? String == "aoa?port=1-2.3")
    }

    @Test func textNamesTheUdevRuleWhenAccessIsMissing() {
        let text = USBAccessoryListing.renderText([Self.info])
        #expect(text.contains("1209:0001  port 1-2.3"))
        #expect(text.contains("71-accessory-http-usb.rules"))
        var accessible = Self.info
        accessible.accessible = true
        accessible.serialNumber = nil
        #expect(!USBAccessoryListing.renderText([accessible]).contains("udev"))
        #expect(accessible.deviceSpec == "usb:1209:0001?port=1-2.3")
    }
}
