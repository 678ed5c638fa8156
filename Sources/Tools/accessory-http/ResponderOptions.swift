import AccessoryResponder
import ArgumentParser

/// Limits of the responder, shared by `serve` and `serve-gadget`.
struct ResponderOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The largest request body accepted, in bytes; a larger one is answered with 413 and the link closed (default: no limit).",
            valueName: "bytes"
        )
    )
    var maxRequestBody: Int?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Close a link that sends no request for this many seconds (default: never).",
            valueName: "seconds"
        )
    )
    var idleTimeout: Double?

    func validate() throws {
        if let maxRequestBody, maxRequestBody < 0 {
            throw ValidationError("--max-request-body must be 0 or more bytes, not \(maxRequestBody)")
        }
        if let idleTimeout, !(idleTimeout > 0 && idleTimeout <= 86_400 * 365) {
            throw ValidationError("--idle-timeout must be a number of seconds above 0, not \(idleTimeout)")
        }
    }

    /// The responder's configuration with these limits.
    func makeConfiguration() -> ResponderConfiguration {
        var configuration = ResponderConfiguration()
        configuration.maxRequestBodySize = self.maxRequestBody
        configuration.idleTimeout = self.idleTimeout.map { .milliseconds(Int64(($0 * 1000).rounded(.up))) }
        return configuration
    }
}
