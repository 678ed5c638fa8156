import Foundation
import Synchronization

/// Files and directories a test process makes once and uses until it ends (certificates, the
/// socket of a fixture served for the whole process), removed when it exits: before, each run
/// of the tests left a few of them in /tmp.
public enum RemovedAtExit {
    private static let paths = Mutex<[String]>([])
    private static let registered = Mutex(false)

    /// Removes `path` (a file, or a directory with what is in it) when the process exits
    /// normally.
    public static func add(_ path: String) {
        Self.paths.withLock { $0.append(path) }
        let first = Self.registered.withLock { registered in
            defer { registered = true }
            return !registered
        }
        if first { atexit { RemovedAtExit.removeAll() } }
    }

    private static func removeAll() {
        for path in Self.paths.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: path) }
    }
}
