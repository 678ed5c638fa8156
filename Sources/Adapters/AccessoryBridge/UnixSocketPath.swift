#if canImport(Glibc)
    import Glibc
#endif

/// The socket file of a `unix:` listener: a stale one (left by a process that died) is removed
/// before binding; a live one, or a file that is not a socket, is left alone with an error.
enum UnixSocketPath {
    static func prepare(_ path: String) throws(BridgeError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }  // nothing there
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            throw BridgeError(
                .bindFailed,
                "cannot listen on unix:\(path): a file that is not a socket is there; remove it or choose another path"
            )
        }
        if Self.someoneListens(path) {
            throw BridgeError(
                .alreadyOwned,
                "another process is already listening on unix:\(path) (a bridge already running?); stop it or choose another path"
            )
        }
        guard unlink(path) == 0 else {
            throw BridgeError(
                .bindFailed,
                "cannot remove the stale socket \(path): \(String(cString: strerror(errno)))"
            )
        }
    }

    /// Whether a connect to `path` succeeds.
    private static func someoneListens(_ path: String) -> Bool {
        let descriptor = socket(AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return result == 0
    }

    /// Gives the socket file its group (if any), then its mode.
    static func apply(mode: mode_t, group: gid_t?, to path: String) throws(BridgeError) {
        if let group, chown(path, uid_t.max, group) != 0 {
            throw BridgeError(
                .bindFailed,
                "cannot give the socket \(path) to group \(group): \(String(cString: strerror(errno))); you must be a member of that group (or root)"
            )
        }
        if chmod(path, mode) != 0 {
            throw BridgeError(
                .bindFailed,
                "cannot set the mode of the socket \(path) to \(String(mode, radix: 8)): \(String(cString: strerror(errno)))"
            )
        }
    }
}
