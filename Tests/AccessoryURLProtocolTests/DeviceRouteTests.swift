import AccessoryTransport
import Foundation
import Testing

@testable import AccessoryURLProtocol

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `AccessoryRoute(name:device:)`, the form URLSessionOnLinux.md (AccessoryURLProtocol.docc) shows, answers for spec kinds
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

    /// `http=2`: URLSession's concurrent tasks to one accessory run as concurrent HTTP/2 streams
    /// of one connection (four 1 s requests in well under 4 s), and bodies arrive intact.
    @Test func anHTTP2RouteRunsTasksAtOnce() async throws {
        AccessoryRouteTable.shared.add(
            AccessoryRoute(name: "spec-h2", device: try DeviceSpec(parsing: "emulator?http=2"))
        )
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    let (_, response) = try await session.data(from: try Fixture.url("accessory://spec-h2/delay/1"))
                    return (response as? HTTPURLResponse)?.statusCode ?? 0
                }
            }
            for try await status in group { #expect(status == 200) }
        }
        let elapsed = ContinuousClock.now - started
        // One after another they take 4 s at least.
        #expect(elapsed < .milliseconds(3500), "four 1 s tasks took \(elapsed): not concurrent")
        let (data, _) = try await session.data(from: try Fixture.url("accessory://spec-h2/bytes/1000000"))
        #expect(data.count == 1_000_000)
        await AccessoryRouteTable.shared.remove("spec-h2")
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
