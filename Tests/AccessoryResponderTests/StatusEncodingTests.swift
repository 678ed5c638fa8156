import Foundation
import NIOCore
import Testing

@testable import AccessoryEmulator

/// `GET /status` is written by hand (it is the small-request hot path); these pin it to the
/// bytes `JSONSerialization` produces for the same object, and check it still parses.
@Suite("Status encoding")
struct StatusEncodingTests {
    static func reference(_ identity: EmulatedAccessory.Identity, _ uptime: Int) -> [UInt8] {
        let response = EmulatorResponses.json(StatusEndpoint.object(identity: identity, uptime: uptime))
        guard case .bytes(let buffer) = response.body else { return [] }
        return Array(buffer.readableBytesView)
    }

    @Test(
        "the hand-written /status body is byte-identical to JSONSerialization's",
        arguments: [
            EmulatedAccessory.Identity(),
            EmulatedAccessory.Identity(
                model: "a/b c",
                serialNumber: "é✓ 日本",
                firmwareVersion: "",
                manufacturer: "x'y<z>&\u{7F}"
            ),
        ]
    )
    func byteIdentical(identity: EmulatedAccessory.Identity) throws {
        for uptime in [0, 1, 59, 86_400, Int(Int32.max), 1 << 40] {
            let body = try #require(StatusEndpoint.encode(identity: identity, uptime: uptime))
            #expect(Array(body.readableBytesView) == Self.reference(identity, uptime))
        }
    }

    @Test("the /status body parses and has every field")
    func parses() throws {
        let identity = EmulatedAccessory.Identity()
        let body = try #require(StatusEndpoint.encode(identity: identity, uptime: 42))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any])
        #expect(json["model"] as? String == "AH-EMU-1")
        #expect(json["serialNumber"] as? String == "EMU0001")
        #expect(json["firmwareVersion"] as? String == "1.0.0")
        #expect(json["manufacturer"] as? String == "accessory-http")
        #expect(json["uptimeSeconds"] as? Int == 42)
        #expect(json.count == 5)
    }

    @Test("values that need escaping are left to JSONSerialization, and the response is still its encoding")
    func escaping() throws {
        for odd in ["quote\"", "back\\slash", "tab\t", "nul\u{0}"] {
            let identity = EmulatedAccessory.Identity(model: odd)
            #expect(StatusEndpoint.encode(identity: identity, uptime: 1) == nil)
            let response = StatusEndpoint.respond(identity: identity, startTime: .now)
            guard case .bytes(let buffer) = response.body else {
                Issue.record("not a bytes body")
                continue
            }
            let json = try JSONSerialization.jsonObject(with: Data(buffer.readableBytesView)) as? [String: Any]
            #expect(json?["model"] as? String == odd)
        }
    }
}
