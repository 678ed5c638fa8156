import Glibc

/// Whether a process group has a member that is not a zombie, from `/proc/PID/stat`.
///
/// Why: `kill(-group, 0)` succeeds while the group has any member, zombies included. A member
/// left behind by the child (a shell's background job) is adopted by init, which reaps it at
/// once; where the adopter does not reap (a container whose PID 1 is not an init, a
/// subreaper that waits only for its own child) the zombie stays, and the wait for the group
/// ran to its limit every time (2 s at the end of each `exec:` link, 2026-12-06).
enum ProcessGroupScan {
    /// True when a process of `group` is running (or stopped), false when every member is a
    /// zombie or there is none; `nil` when `/proc` cannot be read.
    static func hasLiveMember(_ group: pid_t) -> Bool? {
        // A /proc of another PID namespace (a sandbox that did not remount it) names other
        // processes: it cannot say anything about this group.
        guard Self.procIsOurs, let directory = opendir("/proc") else { return nil }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            guard let pid = pid_t(Self.name(of: entry)), let (state, processGroup) = Self.stateAndGroup(of: pid) else {
                continue
            }
            guard processGroup == group else { continue }
            // A process whose main thread has exited shows as a zombie while its other threads
            // run: it is alive while it has more than one task.
            if state != UInt8(ascii: "Z") && state != UInt8(ascii: "X") || Self.taskCount(of: pid) > 1 { return true }
        }
        return false
    }

    /// A directory entry's name, read up to its NUL: an entry is only as long as its name
    /// (`d_reclen`), so loading the whole 256-byte `d_name` field reads past it.
    private static func name(of entry: UnsafeMutablePointer<dirent>) -> String {
        guard let offset = MemoryLayout<dirent>.offset(of: \dirent.d_name) else { return "" }
        return String(cString: (UnsafeRawPointer(entry) + offset).assumingMemoryBound(to: CChar.self))
    }

    /// Whether `/proc` is of this process's PID namespace: `/proc/self` names its pid.
    private static var procIsOurs: Bool {
        var link = [CChar](repeating: 0, count: 32)
        let count = readlink("/proc/self", &link, link.count - 1)
        guard count > 0 else { return false }
        return pid_t(String(decoding: link[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)) == getpid()
    }

    /// How many threads `/proc/PID/task` lists (0 if it cannot be read).
    private static func taskCount(of pid: pid_t) -> Int {
        guard let directory = opendir("/proc/\(pid)/task") else { return 0 }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            if !Self.name(of: entry).hasPrefix(".") { count += 1 }
        }
        return count
    }

    /// The state letter and process group of `pid`, or `nil` if it is gone or unreadable.
    /// `/proc/PID/stat` is `pid (comm) state ppid pgrp …`; `comm` may hold spaces and
    /// parentheses, so the fields are read after the last `)`.
    static func stateAndGroup(of pid: pid_t) -> (state: UInt8, group: pid_t)? {
        let descriptor = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { _ = close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 512)
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0, let close = bytes[..<count].lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = bytes[(close + 1)..<count].split(separator: UInt8(ascii: " "))
        guard fields.count >= 3, let state = fields[0].first,
            let group = pid_t(String(decoding: fields[2], as: UTF8.self))
        else { return nil }
        return (state, group)
    }
}
