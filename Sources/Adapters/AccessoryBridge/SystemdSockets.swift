#if canImport(Glibc)
    import Glibc
#endif

/// Socket activation (`sd_listen_fds(3)`): the service manager passes listening sockets from
/// descriptor 3 on, with `LISTEN_PID` set to this process and `LISTEN_FDS` to their count.
public enum SystemdSockets {
    /// The first descriptor passed (`SD_LISTEN_FDS_START`).
    static let firstDescriptor: CInt = 3

    /// The sockets passed to this process, as listeners; empty when none were. The variables
    /// are removed, so child processes do not take the sockets for theirs.
    public static func take() -> [BridgeListener] {
        guard let pid = getenv("LISTEN_PID").map({ String(cString: $0) }), pid_t(pid) == getpid(),
            let countText = getenv("LISTEN_FDS").map({ String(cString: $0) }), let count = Int(countText), count > 0
        else { return [] }
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        return (0..<CInt(min(count, 64))).map { offset in
            let descriptor = Self.firstDescriptor + offset
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            return .inherited(descriptor: descriptor)
        }
    }
}
