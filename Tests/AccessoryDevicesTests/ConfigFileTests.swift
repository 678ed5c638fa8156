import AccessoryDevices
import AccessoryTransport
import Testing

/// The settings file's parser: what a good file gives, and the code and the line each mistake
/// is reported with (the CLI's end-to-end tests cover where the file is found).
struct ConfigFileTests {
    @Test func aFileWithEveryKindOfLineParses() throws {
        let text = """
            # a comment, then settings
            device = serial:/dev/ttyACM0?baud=115200
            host = printer.local\r
            timeout = 2.5
            session = auto
            http = 2

            [usb 1209:0001]
            zlp = off
            [bridge printer]
            device = usb:1209:0001
            listen = unix:/run/printer.sock
            listen = tcp:127.0.0.1:8080
            idle-release = 2
            allow-remote = no
            tls-name = printer.local
            cacert = /etc/printer-ca.pem
            pin = sha256:one
            pin = sha256:two
            """
        let config = try ConfigFile.parse(text, path: "c")
        #expect(config.device == "serial:/dev/ttyACM0?baud=115200")
        #expect(config.host == "printer.local")
        #expect(config.timeout == 2.5)
        #expect(config.session == .auto)
        #expect(config.http == .http2)
        #expect(config.usbQuirks["1209:0001"] != nil)
        #expect(config.bridges.count == 1)
        #expect(config.bridges.first?.listen == ["unix:/run/printer.sock", "tcp:127.0.0.1:8080"])
        #expect(config.bridges.first?.idleRelease == 2)
        #expect(config.bridges.first?.location == "c:10")
        #expect(config.bridges.first?.tls == nil)
        #expect(
            config.bridges.first?.tlsArguments == [
                "--tls-name", "printer.local", "--cacert", "/etc/printer-ca.pem", "--pin", "sha256:one", "--pin",
                "sha256:two",
            ],
            "TLS settings in file order, as the command line spells them"
        )
    }

    @Test(arguments: [
        ("device = a\nno equals sign", ConfigFileError.Code.malformedLine, "c:2:"),
        ("\n\ncolour = blue", .unknownSetting, "c:3:"),
        ("timeout = -1", .invalidValue, "c:1:"),
        ("timeout = soon", .invalidValue, "c:1:"),
        ("timeout = inf", .invalidValue, "c:1:"),
        ("timeout = 1e300", .invalidValue, "c:1:"),
        ("session = maybe", .invalidValue, "c:1:"),
        ("http = 3", .invalidValue, "c:1:"),
        ("[usb 12:1]", .invalidSection, "c:1:"),
        ("[usb 1209:0001", .invalidSection, "c:1:"),
        ("[usb 1209:0001]\nzlp = sometimes", .invalidValue, "c:2:"),
        ("[bridge a b]", .invalidSection, "c:1:"),
        ("[bridge a]\ndevice = stdio\nlisten = unix:/a\n[bridge a]", .invalidSection, "c:4:"),
        ("[bridge a]\nlisten = unix:/a", .missingSetting, "c:1:"),
        ("[bridge a]\ndevice = stdio", .missingSetting, "c:1:"),
        ("[bridge a]\ngrace = 100000", .invalidValue, "c:2:"),
        ("[bridge a]\nallow-remote = perhaps", .invalidValue, "c:2:"),
        ("[bridge a]\nport = 80", .unknownSetting, "c:2:"),
        ("[bridge a]\ntls = sometimes", .invalidValue, "c:2:"),
        ("[bridge a]\ntls-name =", .invalidValue, "c:2:"),
        ("device = a\rhost = b", .malformedLine, "c:1:"),
        ("\n\ndevice = a\u{2028}b", .malformedLine, "c:3:"),
        ("host = a\u{0}", .malformedLine, "c:1:"),
    ])
    func eachMistakeHasItsCodeAndLine(text: String, code: ConfigFileError.Code, prefix: String) {
        #expect {
            try ConfigFile.parse(text, path: "c")
        } throws: { error in
            guard let error = error as? ConfigFileError else { return false }
            return error.code == code && error.message.hasPrefix(prefix)
        }
    }

    /// CRLF is one Character in Swift, not an LF: a file saved with CRLF line endings was read
    /// as one line, its `device` taking the whole file as its value.
    @Test func crlfLineEndingsAndAByteOrderMarkAreReadAsAnEditorMeansThem() throws {
        let config = try ConfigFile.parse(
            "\u{FEFF}device = emulator\r\nhost = h\r\n[bridge a]\r\ndevice = stdio\r\nlisten = unix:/a\r\n",
            path: "c"
        )
        #expect(config.device == "emulator")
        #expect(config.host == "h")
        #expect(config.bridges.first?.location == "c:3")
        #expect(config.bridges.first?.listen == ["unix:/a"])
    }

    @Test func aMissingFileIsAnEmptyConfiguration() throws {
        let config = try ConfigFile.load(path: "/nonexistent/accessory-http/config")
        #expect(config.device == nil && config.bridges.isEmpty && config.usbQuirks.isEmpty)
    }
}
