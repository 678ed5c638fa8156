extension EmulatedAccessory {
    /// What the emulated accessory reports about itself in `GET /status`.
    public struct Identity: Sendable, Hashable {
        /// The model name.
        public var model: String
        /// The serial number.
        public var serialNumber: String
        /// The firmware version.
        public var firmwareVersion: String
        /// The manufacturer.
        public var manufacturer: String

        /// Creates an identity; the defaults describe the built-in emulator.
        public init(
            model: String = "AH-EMU-1",
            serialNumber: String = "EMU0001",
            firmwareVersion: String = "1.0.0",
            manufacturer: String = "accessory-http"
        ) {
            self.model = model
            self.serialNumber = serialNumber
            self.firmwareVersion = firmwareVersion
            self.manufacturer = manufacturer
        }
    }
}
