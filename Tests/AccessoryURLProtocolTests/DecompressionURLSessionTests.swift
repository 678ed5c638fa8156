import AccessoryTransport
import Foundation
import Testing

@testable import AccessoryURLProtocol

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// As URLSession's own HTTP stack does, a route asks for a compressed body and hands the app
/// the decoded bytes, whether or not the app set Accept-Encoding itself (before, a body the app
/// asked to be gzipped reached it still compressed, with no way to tell). Against a Python
/// device on a child's stdio that always answers with gzip.
@Suite(.serialized) struct DecompressionURLSessionTests {
    static let text = String(repeating: "hello, compressed world\n", count: 20)

    @Test(arguments: [nil, "gzip", "gzip, deflate, br"] as [String?])
    func aGzipBodyReachesTheAppDecoded(appSets acceptEncoding: String?) async throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/gzip-device.py").path
        let name = "gzip-device"
        AccessoryRouteTable.shared.add(
            AccessoryRoute(name: name, device: try DeviceSpec(parsing: "exec:python3 \(script)"))
        )
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        var request = URLRequest(url: try Fixture.url("accessory://\(name)/text"))
        if let acceptEncoding { request.setValue(acceptEncoding, forHTTPHeaderField: "Accept-Encoding") }
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
            await AccessoryRouteTable.shared.remove(name)  // ends the child process
        } catch {
            await AccessoryRouteTable.shared.remove(name)
            throw error
        }
        let http = try #require(response as? HTTPURLResponse)
        #expect(String(decoding: data, as: UTF8.self) == Self.text)
        #expect(http.value(forHTTPHeaderField: "Content-Encoding") == "gzip")
        #expect(http.value(forHTTPHeaderField: "X-Seen-Accept-Encoding") == acceptEncoding ?? "deflate, gzip")
    }
}
