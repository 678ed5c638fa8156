import AccessoryTransport
import Foundation
import Testing

@testable import AccessoryURLProtocol

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `AccessoryRoute(name:device:)`, the form docs/urlsession.md shows, answers for spec kinds
/// the transport layer cannot open alone (before, `emulator` and `usb:` failed on the first
/// request). `usb:` routes run in the QEMU guest test.
@Suite struct DeviceRouteTests {
    @Test func anEmulatorSpecRouteAnswers() async throws {
        AccessoryRouteTable.shared.add(
            AccessoryRoute(name: "spec-emulator", device: try DeviceSpec(parsing: "emulator"))
        )
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(from: try Fixture.url("accessory://spec-emulator/status"))
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: data, as: UTF8.self).contains("AH-EMU-1"))
    }

    @Test func anExecSpecRouteAnswers() async throws {
        // A third-party device on a child's stdio (Python, not our responder).
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/stdio-device.py").path
        AccessoryRouteTable.shared.add(
            AccessoryRoute(name: "spec-exec", device: try DeviceSpec(parsing: "exec:python3 \(script)"))
        )
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let url = try Fixture.url("accessory://spec-exec/status")
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(from: url)
            await AccessoryRouteTable.shared.remove("spec-exec")  // ends the child process
        } catch {
            await AccessoryRouteTable.shared.remove("spec-exec")
            throw error
        }
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: data, as: UTF8.self).contains("python on stdio"))
    }
}
