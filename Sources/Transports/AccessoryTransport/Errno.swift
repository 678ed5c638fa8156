import Glibc

/// The `errno` of a failed system call, captured right after the call so that later calls
/// cannot overwrite it. Internal: transports turn it into a ``TransportError`` that names the
/// device and the fix.
package struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    package let rawValue: CInt

    init(rawValue: CInt) { self.rawValue = rawValue }

    /// The calling thread's current `errno`.
    static var current: Errno { Errno(rawValue: errno) }

    /// `strerror(3)`, e.g. "No such file or directory".
    package var description: String { String(cString: strerror(self.rawValue)) }

    static let interrupted = Errno(rawValue: EINTR)
    static let noSuchFile = Errno(rawValue: ENOENT)
    static let accessDenied = Errno(rawValue: EACCES)
    static let notPermitted = Errno(rawValue: EPERM)
    static let busy = Errno(rawValue: EBUSY)
    static let wouldBlock = Errno(rawValue: EWOULDBLOCK)
    static let connectionRefused = Errno(rawValue: ECONNREFUSED)
    static let noChild = Errno(rawValue: ECHILD)
    static let noSuchProcess = Errno(rawValue: ESRCH)
    static let notATerminal = Errno(rawValue: ENOTTY)
    static let notADirectory = Errno(rawValue: ENOTDIR)
}

/// Runs a system call that reports failure as `-1` plus `errno`, retrying while it fails with
/// `EINTR` (a signal arrived), the way swift-system does by default.
func retryingOnInterrupt<Result: BinaryInteger>(_ call: () -> Result) throws(Errno) -> Result {
    while true {
        let result = call()
        if result != -1 { return result }
        let error = Errno.current
        if error != .interrupted { throw error }
    }
}
