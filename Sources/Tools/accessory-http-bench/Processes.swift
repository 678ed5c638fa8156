import Glibc

/// A failure of the benchmark's own plumbing (spawning, reading, a peer tool's output).
struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Children, descriptors and blocking I/O on plain file descriptors, without Foundation.
enum Sys {
    /// Starts `argv` with its stdin, stdout (and optionally stderr) on the given descriptors.
    /// `argv[0]` is looked up on `PATH` when it has no slash.
    static func spawn(_ argv: [String], stdin: CInt, stdout: CInt, stderr: CInt? = nil) throws -> pid_t {
        guard let program = argv.first else { throw BenchError("spawn: empty command") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 clears close-on-exec on the copies, so the child gets exactly 0, 1 (and 2).
        posix_spawn_file_actions_adddup2(&actions, stdin, 0)
        posix_spawn_file_actions_adddup2(&actions, stdout, 1)
        if let stderr { posix_spawn_file_actions_adddup2(&actions, stderr, 2) }
        let cArguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { for argument in cArguments { free(argument) } }
        // Swift's cooperative threads block most signals and a child inherits the spawning
        // thread's mask: without this, nginx would ignore SIGTERM.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGPIPE, SIGCHLD, SIGHUP] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, program, &actions, &attributes, cArguments, environ)
        guard result == 0 else { throw BenchError("could not start \(program): \(String(cString: strerror(result)))") }
        return pid
    }

    struct Exit {
        let status: CInt
        /// Peak resident set size in bytes.
        let maxRSS: Int
        /// User plus system CPU time, in seconds.
        var cpuSeconds: Double = 0
        var succeeded: Bool { status == 0 }
    }

    /// Waits for `pid` and returns its exit status and peak RSS.
    @discardableResult
    static func wait(_ pid: pid_t) -> Exit {
        var status: CInt = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
        let cpu = { (time: timeval) in Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return Exit(
            status: status,
            maxRSS: Int(usage.ru_maxrss) * 1024,
            cpuSeconds: cpu(usage.ru_utime) + cpu(usage.ru_stime)
        )
    }

    /// Waits for `pid` like ``wait(_:)``, polling the peak RSS (`VmHWM`) of `pid` and of
    /// `others` every 2 ms meanwhile. Unlike `ru_maxrss`, `VmHWM` belongs to the process's own
    /// address space: `posix_spawn` (a vfork) carries the parent's peak into the child's
    /// `ru_maxrss`, so a child of a large benchmark process would report the benchmark's size.
    static func waitWatchingPeak(_ pid: pid_t, others: [pid_t]) -> (exit: Exit, peaks: [pid_t: Int]) {
        var status: CInt = 0
        var usage = rusage()
        var peaks: [pid_t: Int] = [:]
        while true {
            let result = wait4(pid, &status, WNOHANG, &usage)
            if result == pid { break }
            if result < 0 && errno != EINTR { break }
            for watched in [pid] + others {
                peaks[watched] = max(peaks[watched] ?? 0, Self.peakRSS(watched))
            }
            usleep(2000)
        }
        return (Exit(status: status, maxRSS: Int(usage.ru_maxrss) * 1024), peaks)
    }

    /// `VmHWM` of `pid` in bytes (0 once it has exited).
    static func peakRSS(_ pid: pid_t) -> Int {
        let status = readFile("/proc/\(pid)/status")
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }) else { return 0 }
        let kib =
            line.dropFirst("VmHWM:".count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap { Int($0) }
            ?? 0
        return kib * 1024
    }

    static func terminate(_ pid: pid_t) {
        kill(pid, SIGTERM)
        wait(pid)
    }

    /// A connected pair of `AF_UNIX` stream sockets, both close-on-exec.
    static func socketPair() throws -> (CInt, CInt) {
        var fds: [CInt] = [-1, -1]
        let type = CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue)
        guard fds.withUnsafeMutableBufferPointer({ socketpair(AF_UNIX, type, 0, $0.baseAddress) }) == 0 else {
            throw BenchError("socketpair: \(String(cString: strerror(errno)))")
        }
        return (fds[0], fds[1])
    }

    static func writeAll(_ fd: CInt, _ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < bytes.count {
            guard let base = bytes.baseAddress else { return }
            let written = Glibc.write(fd, base + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                throw BenchError("write: \(String(cString: strerror(errno)))")
            }
            offset += written
        }
    }

    static func writeAll(_ fd: CInt, _ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try writeAll(fd, $0) }
    }

    /// Reads exactly `count` bytes into `scratch` chunks, discarding them; returns how many
    /// arrived before EOF.
    @discardableResult
    static func drain(_ fd: CInt, count: Int, scratch: UnsafeMutableRawBufferPointer) throws -> Int {
        var total = 0
        while total < count {
            guard let base = scratch.baseAddress else { return total }
            let got = read(fd, base, min(scratch.count, count - total))
            if got < 0 {
                if errno == EINTR { continue }
                throw BenchError("read: \(String(cString: strerror(errno)))")
            }
            if got == 0 { break }
            total += got
        }
        return total
    }

    /// One `read(2)` into `chunk`; -1 with errno set on failure.
    static func readSome(_ fd: CInt, into chunk: inout [UInt8]) -> Int {
        chunk.withUnsafeMutableBytes { buffer -> Int in
            guard let base = buffer.baseAddress else { return 0 }
            return read(fd, base, buffer.count)
        }
    }

    /// Reads until `terminator` has been seen; returns everything read (which may run past it).
    static func readUntil(_ fd: CInt, _ terminator: [UInt8]) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.firstRange(of: terminator) == nil {
            let got = Sys.readSome(fd, into: &chunk)
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else {
                throw BenchError("the peer closed before sending \(terminator.count) terminator bytes")
            }
            bytes += chunk[0..<got]
        }
        return bytes
    }

    static func readFile(_ path: String) -> String {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let got = Sys.readSome(fd, into: &chunk)
            if got <= 0 { break }
            bytes += chunk[0..<got]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func writeFile(_ path: String, _ bytes: UnsafeRawBufferPointer) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw BenchError("cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        try writeAll(fd, bytes)
    }

    static func createFile(_ path: String) throws -> CInt {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw BenchError("cannot create \(path): \(String(cString: strerror(errno)))") }
        return fd
    }

    static func devNull() throws -> CInt {
        let fd = open("/dev/null", O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw BenchError("cannot open /dev/null") }
        return fd
    }

    /// The directory this executable is in (where `swift build` also puts `accessory-http`).
    static func executablePath() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return CommandLine.arguments[0] }
        return String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func which(_ name: String) -> String? {
        var directories: [String] = []
        if let path = getenv("PATH") { directories = String(cString: path).split(separator: ":").map(String.init) }
        directories += ["/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin"]
        for directory in directories {
            let candidate = "\(directory)/\(name)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    static func now() -> ContinuousClock.Instant { ContinuousClock.now }

    /// CPU time used so far by every thread of process `pid` (user + system), in seconds, from
    /// `/proc/PID/task/*/schedstat` (nanosecond resolution, unlike `utime`/`stime` ticks).
    /// Threads that have exited are not counted, so call it while the process is busy.
    static func cpuSeconds(_ pid: pid_t) -> Double {
        guard let directory = opendir("/proc/\(pid)/task") else { return 0 }
        defer { closedir(directory) }
        var total: UInt64 = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            guard name.first?.isNumber == true else { continue }
            let stat = readFile("/proc/\(pid)/task/\(name)/schedstat")
            if let first = stat.split(separator: " ").first, let nanoseconds = UInt64(first) {
                total += nanoseconds
            }
        }
        return Double(total) / 1e9
    }
}

extension Duration {
    var seconds: Double {
        let (s, atto) = self.components
        return Double(s) + Double(atto) * 1e-18
    }
}
