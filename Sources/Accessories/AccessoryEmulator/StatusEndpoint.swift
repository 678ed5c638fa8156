import AccessoryResponder
import HTTPTypes
import NIOCore

/// `GET /status`: who the accessory is and how long it has been up.
enum StatusEndpoint {
    static func respond(identity: EmulatedAccessory.Identity, startTime: ContinuousClock.Instant) -> ResponderResponse {
        let uptime = Int(max(Duration.zero, startTime.duration(to: .now)).components.seconds)
        guard let body = Self.encode(identity: identity, uptime: uptime) else {
            return EmulatorResponses.json(Self.object(identity: identity, uptime: uptime))
        }
        return ResponderResponse(status: .ok, headerFields: Self.fields, body: .bytes(body))
    }

    private static let fields: HTTPFields = [.contentType: "application/json"]

    /// The body as a dictionary, for `JSONSerialization` (the reference encoding).
    static func object(identity: EmulatedAccessory.Identity, uptime: Int) -> [String: Any] {
        [
            "model": identity.model,
            "serialNumber": identity.serialNumber,
            "firmwareVersion": identity.firmwareVersion,
            "manufacturer": identity.manufacturer,
            "uptimeSeconds": uptime,
        ]
    }

    /// The body exactly as ``EmulatorResponses/json(_:status:headerFields:)`` encodes
    /// ``object(identity:uptime:)`` (keys sorted, no escaped slashes, a final newline), written
    /// directly; `nil` when a value would need escaping (`"`, `\` or a control character), which
    /// is then left to `JSONSerialization`.
    static func encode(identity: EmulatedAccessory.Identity, uptime: Int) -> ByteBuffer? {
        let values = [identity.firmwareVersion, identity.manufacturer, identity.model, identity.serialNumber]
        for value in values
        where value.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            return nil
        }
        var buffer = ByteBuffer()
        buffer.reserveCapacity(values.reduce(96) { $0 + $1.utf8.count })
        buffer.writeStaticString(#"{"firmwareVersion":""#)
        buffer.writeString(identity.firmwareVersion)
        buffer.writeStaticString(#"","manufacturer":""#)
        buffer.writeString(identity.manufacturer)
        buffer.writeStaticString(#"","model":""#)
        buffer.writeString(identity.model)
        buffer.writeStaticString(#"","serialNumber":""#)
        buffer.writeString(identity.serialNumber)
        buffer.writeStaticString(#"","uptimeSeconds":"#)
        buffer.writeString(String(uptime))
        buffer.writeStaticString("}\n")
        return buffer
    }
}
