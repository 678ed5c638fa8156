import Testing

@testable import AccessoryTransport

@Suite struct DeviceSpecTests {
    static let valid: [(text: String, spec: DeviceSpec)] = [
        ("emulator", .emulator),
        ("stdio", .stdio),
        ("unix:/run/acc.sock", .unix(path: "/run/acc.sock")),
        ("unix:acc.sock", .unix(path: "acc.sock")),
        ("UNIX:/run/acc.sock", .unix(path: "/run/acc.sock")),
        ("exec:socat - /dev/ttyACM0", .exec(command: "socat - /dev/ttyACM0")),
        ("exec:sh -c 'echo a:b?c=d'", .exec(command: "sh -c 'echo a:b?c=d'")),
        (
            "exec?independent:ssh gadget serve --device stdio",
            .exec(command: "ssh gadget serve --device stdio", independentStreams: true)
        ),
        ("serial:/dev/ttyACM0", .serial(path: "/dev/ttyACM0", settings: SerialSettings())),
        (
            "serial:/dev/ttyACM0?baud=115200&flow=rtscts&data=8&parity=none&stop=1",
            .serial(path: "/dev/ttyACM0", settings: SerialSettings(flowControl: .rtscts))
        ),
        (
            "serial:/dev/ttyS0?baud=9600&data=7&parity=even&stop=2",
            .serial(
                path: "/dev/ttyS0",
                settings: SerialSettings(baudRate: 9600, dataBits: .seven, parity: .even, stopBits: .two)
            )
        ),
        (
            "serial:/dev/ttyUSB1?parity=odd&data=5",
            .serial(path: "/dev/ttyUSB1", settings: SerialSettings(dataBits: .five, parity: .odd))
        ),
        // Parsing accepts any positive rate; opening decides whether termios can set it.
        ("serial:/dev/ttyUSB1?baud=12345", .serial(path: "/dev/ttyUSB1", settings: SerialSettings(baudRate: 12345))),
        ("usb:1209:0001", .usb(USBDeviceSelector(vendorID: 0x1209, productID: 0x0001))),
        ("usb:ABCD:ef01", .usb(USBDeviceSelector(vendorID: 0xABCD, productID: 0xEF01))),
        (
            "usb:1209:0001?serial=A1B2&port=1-2.3&interface=0",
            .usb(
                USBDeviceSelector(
                    vendorID: 0x1209,
                    productID: 0x0001,
                    serialNumber: "A1B2",
                    portPath: "1-2.3",
                    interfaceNumber: 0
                )
            )
        ),
        ("usb:1209:0001?interface=2", .usb(USBDeviceSelector(vendorID: 0x1209, productID: 0x0001, interfaceNumber: 2))),
        ("aoa", .aoa(AndroidAccessorySelector())),
        ("aoa?port=1-1", .aoa(AndroidAccessorySelector(portPath: "1-1"))),
        ("aoa:18d1:4EE7", .aoa(AndroidAccessorySelector(vendorID: 0x18D1, productID: 0x4EE7))),
        (
            "aoa:18d1:4ee7?manufacturer=Acme&model=Meter&description=A meter&version=2.0&uri=https://acme.example/m?x=1&serial=M-1&port=1-2",
            .aoa(
                AndroidAccessorySelector(
                    vendorID: 0x18D1,
                    productID: 0x4EE7,
                    portPath: "1-2",
                    identity: AndroidAccessoryIdentity(
                        manufacturer: "Acme",
                        model: "Meter",
                        description: "A meter",
                        version: "2.0",
                        uri: "https://acme.example/m?x=1",
                        serial: "M-1"
                    )
                )
            )
        ),
    ]

    @Test(arguments: Self.valid)
    func parsesAndRoundTrips(_ example: (text: String, spec: DeviceSpec)) throws {
        let parsed = try DeviceSpec(parsing: example.text)
        #expect(parsed == example.spec)
        #expect(try DeviceSpec(parsing: parsed.description) == parsed)
    }

    @Test func canonicalDescriptions() throws {
        #expect(
            try DeviceSpec(parsing: "serial:/dev/ttyACM0?baud=115200&data=8&parity=none&stop=1&flow=none").description
                == "serial:/dev/ttyACM0"
        )
        #expect(
            try DeviceSpec(parsing: "serial:/dev/ttyS0?stop=2&baud=9600").description
                == "serial:/dev/ttyS0?baud=9600&stop=2"
        )
        #expect(try DeviceSpec(parsing: "usb:ABCD:EF01?port=3-1").description == "usb:abcd:ef01?port=3-1")
        #expect(DeviceSpec.usb(USBDeviceSelector(vendorID: 0x1, productID: 0x20)).description == "usb:0001:0020")
        #expect(try DeviceSpec(parsing: "Exec:cat").description == "exec:cat")
    }

    static let invalid: [(text: String, reason: String)] = [
        ("", "empty"),
        ("tcp:localhost:80", "unknown scheme \"tcp\""),
        ("emulatorx", "unknown device"),
        ("/dev/ttyACM0", "serial:/dev/ttyACM0 or unix:/dev/ttyACM0"),
        ("emulator:x", "takes nothing"),
        ("stdio:", "takes nothing"),
        ("stdio?http=2", "stdio takes no options in the spec"),
        ("exec?session=on:cat", "exec: takes no options in the spec"),
        ("unix:", "needs the socket's path"),
        ("exec:", "needs a command"),
        ("exec:   ", "needs a command"),
        ("serial:", "needs the tty's path"),
        ("serial:?baud=9600", "needs the tty's path"),
        ("serial:/dev/ttyACM0?", "nothing follows"),
        ("serial:/dev/ttyACM0?baud=fast", "baud=fast"),
        ("serial:/dev/ttyACM0?baud=0", "baud=0"),
        ("serial:/dev/ttyACM0?baud=-9600", "baud=-9600"),
        ("serial:/dev/ttyACM0?baud=+9600", "baud=+9600"),
        ("serial:/dev/ttyACM0?baud=", "empty value"),
        ("serial:/dev/ttyACM0?speed=9600", "unknown option \"speed\""),
        ("serial:/dev/ttyACM0?baud=9600&baud=9600", "more than once"),
        ("serial:/dev/ttyACM0?baud", "key=value"),
        ("serial:/dev/ttyACM0?baud=9600&", "key=value"),
        ("serial:/dev/ttyACM0?data=9", "data=9"),
        ("serial:/dev/ttyACM0?data=+8", "data=+8"),
        ("serial:/dev/ttyACM0?parity=mark", "parity=mark"),
        ("serial:/dev/ttyACM0?stop=3", "stop=3"),
        ("serial:/dev/ttyACM0?flow=xonxoff", "flow=xonxoff"),
        ("usb:", "VID:PID"),
        ("usb:1209", "VID:PID"),
        ("usb:1209:0001:2", "VID:PID"),
        ("usb:12G9:0001", "vendor ID \"12G9\""),
        ("usb:1209:1", "product ID \"1\""),
        ("usb:01209:0001", "vendor ID \"01209\""),
        ("usb:1209:0001?port=abc", "port=abc"),
        ("usb:1209:0001?port=1-", "port=1-"),
        ("usb:1209:0001?interface=256", "interface=256"),
        ("usb:1209:0001?interface=-1", "interface=-1"),
        ("usb:1209:0001?interface=+1", "interface=+1"),
        ("usb:1209:0001?baud=9600", "unknown option \"baud\""),
        ("aoa:18d1", "VID:PID"),
        ("aoa:", "VID:PID"),
        ("aoa:18d1:4ee7?interface=0", "unknown option \"interface\""),
        ("aoa?model=", "empty value"),
        ("aoa?port=x", "port=x"),
        ("aoa?uri=" + String(repeating: "u", count: 256), "at most 255"),
    ]

    @Test(arguments: Self.invalid)
    func rejectsWithReasonAndAcceptedForms(_ example: (text: String, reason: String)) {
        #expect {
            try DeviceSpec(parsing: example.text)
        } throws: { error in
            guard let error = error as? TransportError else { return false }
            return error.code == .invalidDeviceSpec
                && error.message.contains(example.reason)
                && error.message.contains(DeviceSpec.acceptedForms)
        }
    }

    @Test func acceptedFormsListsEveryScheme() {
        for form in [
            "emulator", "stdio", "unix:", "exec:", "serial:", "usb:", "aoa", "manufacturer=", "baud=", "flow=",
            "interface=",
        ] {
            #expect(DeviceSpec.acceptedForms.contains(form), "missing \(form)")
        }
    }

    @Test func makeTransport() throws {
        #expect(try DeviceSpec.unix(path: "/run/a.sock").makeTransport() is UnixSocketTransport)
        #expect(try DeviceSpec.exec(command: "cat").makeTransport() is ChildProcessTransport)
        #expect(try DeviceSpec.stdio.makeTransport() is StdioTransport)
        let serial = try DeviceSpec(parsing: "serial:/dev/ttyS0?baud=9600").makeTransport()
        #expect((serial as? SerialTransport)?.settings.baudRate == 9600)
        #expect(serial.reopenMayCarryStaleBytes)

        #expect(throws: TransportError.self) { try DeviceSpec.emulator.makeTransport() }
        do {
            _ = try DeviceSpec.usb(USBDeviceSelector(vendorID: 0x1209, productID: 1)).makeTransport()
            Issue.record("usb is opened by AccessoryUSB, not here")
        } catch {
            #expect(error.code == .unsupported)
            #expect(error.message.contains("AccessoryUSB"))
        }
    }
}
