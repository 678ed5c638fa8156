import Glibc
import NIOCore
import Testing

@testable import AccessoryTransport

@Suite struct SerialTransportTests {
    /// The slave's raw termios flags, read through a fresh descriptor.
    private func flags(of path: String) throws -> [tcflag_t] {
        let fd = open(path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
        try #require(fd >= 0)
        defer { close(fd) }
        var attributes = termios()
        try #require(tcgetattr(fd, &attributes) == 0)
        return [attributes.c_iflag, attributes.c_oflag, attributes.c_lflag, attributes.c_cflag]
    }

    @Test func configuresRawModeAndExchangesBytes() async throws {
        let pty = try PseudoTerminal()
        let before = try SerialTransport.currentSettings(path: pty.slavePath)
        #expect(!before.isRaw, "a new pty starts cooked, so the test can see the change")
        let beforeFlags = try self.flags(of: pty.slavePath)

        // Not 7E1: the pty driver forces CS8 and clears PARENB (see the next test).
        let settings = SerialSettings(baudRate: 9600, stopBits: .two, flowControl: .rtscts)
        let transport = SerialTransport(path: pty.slavePath, settings: settings)
        let received = ReceivedBytes()
        let (stream, released) = try await transport.openTrackingRelease(
            on: testEventLoop,
            configure: received.configure
        )

        let applied = try SerialTransport.currentSettings(path: pty.slavePath)
        #expect(applied.isRaw)
        #expect(applied.inputBaudRate == 9600)
        #expect(applied.outputBaudRate == 9600)
        #expect(applied.serialSettings == settings)
        #expect(applied.ignoresModemControlLines)
        #expect(applied.receiverEnabled)
        #expect(applied.minimumReadBytes == 1)
        #expect(applied.readTimeoutDeciseconds == 0)

        // Bytes that cooked mode would have changed (CR → LF, ^C) must pass untouched.
        let request = "GET / HTTP/1.1\r\n\u{3}\r\n"
        try await stream.channel.writeText(request)
        #expect(pty.read(expected: request.utf8.count) == request)
        pty.write("HTTP/1.1 200 OK\r\n\r\n")
        #expect(
            await eventually { received.text == "HTTP/1.1 200 OK\r\n\r\n" },
            "got \(received.text.debugDescription)"
        )

        try await stream.channel.close()
        #expect(await value(of: released) != nil, "the port was not released")
        #expect(try self.flags(of: pty.slavePath) == beforeFlags)
        #expect(try SerialTransport.currentSettings(path: pty.slavePath) == before)
    }

    @Test func settingsTheDriverIgnoresAreReportedAndTheLineIsLeftAsItWas() async throws {
        let pty = try PseudoTerminal()
        let beforeFlags = try self.flags(of: pty.slavePath)
        let transport = SerialTransport(path: pty.slavePath, settings: SerialSettings(dataBits: .seven, parity: .even))
        let error = await transportError {
            _ = try await transport.open(on: testEventLoop, configure: ReceivedBytes().configure)
        }
        #expect(error?.code == .unsupportedSetting)
        #expect(error?.message.contains("115200 7E1") == true)
        #expect(try self.flags(of: pty.slavePath) == beforeFlags)
        // Not left locked either.
        let stream = try await SerialTransport(path: pty.slavePath).open(
            on: testEventLoop,
            configure: ReceivedBytes().configure
        )
        try await stream.channel.close()
    }

    @Test func defaultSettingsAre115200EightNOne() async throws {
        let pty = try PseudoTerminal()
        let (stream, released) = try await SerialTransport(path: pty.slavePath)
            .openTrackingRelease(on: testEventLoop, configure: ReceivedBytes().configure)
        let applied = try SerialTransport.currentSettings(path: pty.slavePath)
        #expect(applied.serialSettings == SerialSettings())
        #expect(applied.description == "raw, 115200 8N1, flow control none, CLOCAL, CREAD, VMIN=1, VTIME=0")
        try await stream.channel.close()
        _ = await value(of: released)
    }

    @Test func dropsInputThatArrivedBeforeTheOpen() async throws {
        let pty = try PseudoTerminal()
        // Hold the slave open so the kernel keeps what the master writes.
        let holder = open(pty.slavePath, O_RDWR | O_NOCTTY | O_CLOEXEC)
        try #require(holder >= 0)
        defer { close(holder) }
        var raw = termios()
        tcgetattr(holder, &raw)
        cfmakeraw(&raw)
        tcsetattr(holder, TCSANOW, &raw)
        pty.write("stale bytes")
        try await Task.sleep(for: .milliseconds(50))

        let received = ReceivedBytes()
        let (stream, released) = try await SerialTransport(path: pty.slavePath)
            .openTrackingRelease(on: testEventLoop, configure: received.configure)
        pty.write("fresh")
        #expect(await eventually { received.text.contains("fresh") })
        #expect(received.text == "fresh")
        try await stream.channel.close()
        _ = await value(of: released)
    }

    @Test func secondOpenIsBusyAndTheFirstCloseFreesTheLine() async throws {
        let pty = try PseudoTerminal()
        let transport = SerialTransport(path: pty.slavePath)
        let (stream, released) = try await transport.openTrackingRelease(
            on: testEventLoop,
            configure: ReceivedBytes().configure
        )

        let error = await transportError {
            _ = try await transport.open(on: testEventLoop, configure: ReceivedBytes().configure)
        }
        #expect(error?.code == .deviceBusy)
        #expect(error?.message.contains("fuser \(pty.slavePath)") == true)

        try await stream.channel.close()
        #expect(await value(of: released) != nil)
        let again = try await transport.open(on: testEventLoop, configure: ReceivedBytes().configure)
        try await again.channel.close()
    }

    @Test func unsupportedBaudRate() async throws {
        let pty = try PseudoTerminal()
        let error = await transportError {
            _ = try await SerialTransport(path: pty.slavePath, settings: SerialSettings(baudRate: 12345))
                .open(on: testEventLoop, configure: ReceivedBytes().configure)
        }
        #expect(error?.code == .unsupportedSetting)
        #expect(error?.message.contains("12345") == true)
    }

    @Test func missingPath() async {
        let error = await transportError {
            _ = try await SerialTransport(path: "/dev/does-not-exist-acc").open(
                on: testEventLoop,
                configure: ReceivedBytes().configure
            )
        }
        #expect(error?.code == .deviceNotFound)
        #expect(error?.message.contains("/dev/does-not-exist-acc") == true)
    }

    @Test func regularFileAndDirectoryAreTheWrongKind() async throws {
        let file = temporaryPath(".txt")
        let fd = open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
        try #require(fd >= 0)
        close(fd)
        defer { unlink(file) }

        for path in [file, "/tmp"] {
            let error = await transportError {
                _ = try await SerialTransport(path: path).open(on: testEventLoop, configure: ReceivedBytes().configure)
            }
            #expect(error?.code == .wrongKindOfFile, "\(path)")
            #expect(error?.message.contains(path) == true)
        }
    }

    @Test func currentSettingsOfANonTerminal() throws {
        let pipeEnds = try FileDescriptor.pipe()
        defer {
            try? pipeEnds.read.close()
            try? pipeEnds.write.close()
        }
        #expect(throws: TransportError.self) { try SerialTransport.currentSettings(descriptor: pipeEnds.read.rawValue) }
    }
}
