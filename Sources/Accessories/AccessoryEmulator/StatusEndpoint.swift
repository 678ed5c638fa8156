import AccessoryResponder

/// `GET /status`: who the accessory is and how long it has been up.
enum StatusEndpoint {
    static func respond(identity: EmulatedAccessory.Identity, startTime: ContinuousClock.Instant) -> ResponderResponse {
        let uptime = max(Duration.zero, startTime.duration(to: .now)).components.seconds
        return EmulatorResponses.json([
            "model": identity.model,
            "serialNumber": identity.serialNumber,
            "firmwareVersion": identity.firmwareVersion,
            "manufacturer": identity.manufacturer,
            "uptimeSeconds": Int(uptime),
        ])
    }
}
