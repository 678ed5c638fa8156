import AccessoryClient
import AccessoryDevices
import AccessoryEmulator
import AccessoryResponder
import AccessoryTransport
import Foundation
import Glibc
import NIOPosix
import Testing

/// Every spec kind resolves to a transport that answers a request (the `usb:` kind is
/// exercised end to end in the QEMU USB test, scripts/usb-vm-guest-test).
@Suite(.timeLimit(.minutes(1)))
struct DeviceResolverTests {
    func status(_ spec: String) async throws -> (Int, String) {
        let transport = try DeviceResolver().transport(for: try DeviceSpec(parsing: spec))
        let client = AccessoryClient(transport: transport)
        do {
            let (head, body) = try await client.data(AccessoryRequest(path: "/status", timeout: .seconds(10)))
            await client.shutdown()
            return (head.status.code, String(buffer: body))
        } catch {
            await client.shutdown()
            throw error
        }
    }

    static func temporaryPath(_ name: String) -> String {
        "/tmp/ahdev-\(UInt32.random(in: 0...UInt32.max))-\(name)"
    }

    @Test func emulator() async throws {
        let (status, body) = try await self.status("emulator")
        #expect(status == 200)
        #expect(body.contains("AH-EMU-1"), "\(body)")
    }

    @Test func unixSocket() async throws {
        let path = Self.temporaryPath("acc.sock")
        let responder = EmulatedAccessory().makeResponder()
        let server = Task {
            try await responder.serveUnixSocket(path: path, group: MultiThreadedEventLoopGroup.singleton)
        }
        defer {
            server.cancel()
            unlink(path)
        }
        for _ in 0..<200 where !FileManager.default.fileExists(atPath: path) {
            try await Task.sleep(for: .milliseconds(10))
        }
        let (status, body) = try await self.status("unix:" + path)
        #expect(status == 200)
        #expect(body.contains("AH-EMU-1"), "\(body)")
    }

    @Test func childProcess() async throws {
        // A minimal HTTP/1.1 device on stdin/stdout, written in Python: not our responder.
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/stdio-device.py").path
        let (status, body) = try await self.status("exec:python3 \(script)")
        #expect(status == 200)
        #expect(body.contains("python on stdio"), "\(body)")
    }

    /// `exec?independent:` — every run of the command is its own stream, so a request that timed
    /// out ends that run instead of being drained, and the next request starts a new one at
    /// once (with plain `exec:` it would wait behind the drain, bounded by 5 s).
    @Test func anIndependentExecDeviceIsNotDrained() async throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/stdio-device.py").path
        let spec = try DeviceSpec(parsing: "exec?independent:python3 \(script)")
        let transport = try DeviceResolver().transport(for: spec)
        #expect(transport.opensIndependentStreams)
        #expect(
            !(try DeviceResolver().transport(for: DeviceSpec(parsing: "exec:python3 \(script)")).opensIndependentStreams)
        )
        let client = AccessoryClient(transport: transport)
        for attempt in 0..<3 {
            await #expect(throws: AccessoryClientError.self) {
                _ = try await client.data(AccessoryRequest(path: "/slow", timeout: .milliseconds(300)))
            }
            let started = ContinuousClock.now
            let (head, _) = try await client.data(AccessoryRequest(path: "/status"))
            let took = ContinuousClock.now - started
            #expect(head.status == .ok)
            // A new python3 process starts in well under a second; the drain would take 5 s.
            #expect(took < .seconds(2), "attempt \(attempt): the next answer took \(took)")
        }
        await client.shutdown()
    }

    @Test func serialLineOverAPty() async throws {
        // The responder plays the accessory on the pty's master side; the spec names the
        // slave, as it would name /dev/ttyACM0. No socat: nothing to reap.
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        try #require(master >= 0)
        // unlockpt and ptsname_r are hidden from Swift's Glibc module: look them up.
        let unlock = unsafeBitCast(
            try #require(dlsym(nil, "unlockpt")),
            to: (@convention(c) (CInt) -> CInt).self
        )
        let name = unsafeBitCast(
            try #require(dlsym(nil, "ptsname_r")),
            to: (@convention(c) (CInt, UnsafeMutablePointer<CChar>?, Int) -> CInt).self
        )
        var path = [CChar](repeating: 0, count: 128)
        guard unlock(master) == 0, name(master, &path, path.count) == 0 else {
            close(master)
            Issue.record("unlockpt/ptsname_r failed: errno \(errno)")
            return
        }
        let slave = String(decoding: path.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let responder = EmulatedAccessory().makeResponder()
        let server = Task {
            try await responder.serve(descriptor: master)
        }
        defer { server.cancel() }
        let (status, body) = try await self.status("serial:" + slave)
        #expect(status == 200)
        #expect(body.contains("AH-EMU-1"), "\(body)")
    }

    @Test func makeTransportNamesTheResolverForTheKindsItCannotOpen() throws {
        #expect {
            _ = try DeviceSpec.emulator.makeTransport()
        } throws: { error in
            (error as? TransportError)?.message.contains("DeviceResolver") == true
        }
    }
}
