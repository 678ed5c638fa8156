import AccessoryResponder

/// `/delay/SECONDS`: answers after a pause of up to 60 s (fractions allowed), for timeout tests.
enum DelayEndpoint {
    static let maxSeconds = 60.0

    static func respond(seconds text: String) async throws -> ResponderResponse {
        guard let seconds = Double(text), seconds.isFinite, seconds >= 0, seconds <= Self.maxSeconds else {
            return EmulatorResponses.error(
                .badRequest,
                "the delay must be a number of seconds from 0 to \(Int(Self.maxSeconds))"
            )
        }
        // Cancellable: if the link goes away while waiting, the sleep throws and nothing is sent.
        try await Task.sleep(for: .milliseconds(Int((seconds * 1000).rounded())))
        return EmulatorResponses.json(["delay": seconds])
    }
}
