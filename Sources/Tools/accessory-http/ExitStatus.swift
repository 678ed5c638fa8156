import AccessoryClient
import ArgumentParser

/// The documented exit codes of `accessory-http` (sysexits.h where one fits; 22 as in curl).
enum ExitStatus: Int32 {
    case success = 0
    /// Anything not covered below.
    case failure = 1
    /// `--fail` and the device answered with a status of 400 or more (curl uses 22 too).
    case httpError = 22
    /// The command line was wrong: unknown option, bad device spec, bad header (EX_USAGE).
    case usage = 64
    /// The device could not be opened or the link broke (EX_UNAVAILABLE).
    case transport = 69
    /// A local file could not be read or written (EX_IOERR).
    case file = 74
    /// Opening, the device's silence, a USB device taking nothing written to it (its write
    /// timeout), or the whole exchange took too long (EX_TEMPFAIL).
    case timeout = 75
    /// The device answered with something that is not valid HTTP (EX_PROTOCOL).
    case protocolError = 76

    init(for error: AccessoryClientError) {
        switch error.code {
        case .invalidRequest: self = .usage
        case .transportFailed, .shutDown, .tlsUntrusted, .tlsFailed: self = .transport
        case .tlsConfiguration: self = .usage
        case .timedOut: self = .timeout
        case .protocolError, .redirectFailed, .responseTooLarge: self = .protocolError
        case .fileError, .requestBodyFailed: self = .file
        default: self = .failure
        }
    }

    var exitCode: ExitCode { ExitCode(self.rawValue) }
}

/// An error the CLI reports itself: the message goes to stderr, the status is the exit code.
struct CLIError: Error, CustomStringConvertible {
    let status: ExitStatus
    let message: String

    init(_ status: ExitStatus, _ message: String) {
        self.status = status
        self.message = message
    }

    var description: String { self.message }
}
