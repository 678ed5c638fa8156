import Glibc

/// How a child process ended, decoded from the status `waitpid(2)` reports.
enum ExitStatus: Sendable, Hashable, CustomStringConvertible {
    /// It called `exit` with this code.
    case exited(CInt)
    /// A signal ended it.
    case signaled(CInt)
    /// It was reaped by someone else (e.g. `SIGCHLD` set to `SIG_IGN`), so the status is lost.
    case unknown

    /// Decodes a `waitpid` status; `WIFEXITED` and friends are C macros Swift cannot call.
    init(waitStatus status: CInt) {
        let signal = status & 0x7f
        self = signal == 0 ? .exited((status >> 8) & 0xff) : .signaled(signal)
    }

    /// e.g. "exited with status 3" or "was killed by signal 15 (SIGTERM)".
    var description: String {
        switch self {
        case .exited(let code):
            return "exited with status \(code)"
        case .signaled(let signal):
            let name: String =
                switch signal {
                case SIGHUP: " (SIGHUP)"
                case SIGINT: " (SIGINT)"
                case SIGKILL: " (SIGKILL)"
                case SIGPIPE: " (SIGPIPE)"
                case SIGTERM: " (SIGTERM)"
                case SIGSEGV: " (SIGSEGV)"
                case SIGABRT: " (SIGABRT)"
                default: ""
                }
            return "was killed by signal \(signal)\(name)"
        case .unknown:
            return "exited (its status was collected elsewhere)"
        }
    }
}
