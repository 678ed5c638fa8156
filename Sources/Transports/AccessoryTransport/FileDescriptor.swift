import Glibc

/// A raw descriptor with thin, typed wrappers over the system calls the transports need. Each
/// method names the C call it wraps, retries on `EINTR` and throws ``Errno``.
///
/// It does not own the descriptor: whoever created it decides when to ``close()`` it.
struct FileDescriptor: Hashable, Sendable {
    let rawValue: CInt

    init(rawValue: CInt) { self.rawValue = rawValue }

    static let standardInput = FileDescriptor(rawValue: STDIN_FILENO)
    static let standardOutput = FileDescriptor(rawValue: STDOUT_FILENO)

    /// `open(2)`. Callers pass `O_CLOEXEC` so a child process never inherits the descriptor.
    static func open(_ path: String, flags: CInt) throws(Errno) -> FileDescriptor {
        let fd = try retryingOnInterrupt { Glibc.open(path, flags, 0) }
        return FileDescriptor(rawValue: fd)
    }

    /// `pipe2(O_CLOEXEC)`: a new pipe whose ends a child process inherits only when they are
    /// explicitly `dup2`ed onto its standard descriptors.
    static func pipe() throws(Errno) -> (read: FileDescriptor, write: FileDescriptor) {
        var ends: [CInt] = [-1, -1]
        if let pipe2 = GlibcExtensions.pipe2 {
            _ = try ends.withUnsafeMutableBufferPointer { (buffer) throws(Errno) in
                try retryingOnInterrupt { pipe2(buffer.baseAddress, O_CLOEXEC) }
            }
        } else {
            // Not atomic: a child spawned by another thread in between could inherit the pipe.
            _ = try ends.withUnsafeMutableBufferPointer { (buffer) throws(Errno) in
                try retryingOnInterrupt { Glibc.pipe(buffer.baseAddress) }
            }
            for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        }
        return (FileDescriptor(rawValue: ends[0]), FileDescriptor(rawValue: ends[1]))
    }

    /// `close(2)`. Not retried on `EINTR`: Linux releases the descriptor even then, and a retry
    /// could close a descriptor another thread has just been given.
    func close() throws(Errno) {
        if Glibc.close(self.rawValue) == -1 { throw Errno.current }
    }

    /// `fcntl(F_DUPFD_CLOEXEC)`: a second descriptor for the same open file, close-on-exec.
    func duplicate() throws(Errno) -> FileDescriptor {
        let fd = try retryingOnInterrupt { fcntl(self.rawValue, F_DUPFD_CLOEXEC, CInt(0)) }
        return FileDescriptor(rawValue: fd)
    }

    /// `fstat(2)`, reduced to the kind of file.
    func kind() throws(Errno) -> FileKind {
        var status = stat()
        _ = try retryingOnInterrupt { fstat(self.rawValue, &status) }
        return FileKind(mode: status.st_mode)
    }

    /// Whether the descriptor is `/dev/null` (same device number), which epoll refuses.
    var isNullDevice: Bool {
        var mine = stat()
        var null = stat()
        guard fstat(self.rawValue, &mine) == 0, stat("/dev/null", &null) == 0 else { return false }
        return FileKind(mode: mine.st_mode) == .characterDevice && mine.st_rdev == null.st_rdev
    }

    /// `isatty(3)`.
    var isTerminal: Bool { isatty(self.rawValue) == 1 }

    /// `flock(2)` with `operation` such as `LOCK_EX | LOCK_NB` or `LOCK_UN`.
    func lock(_ operation: CInt) throws(Errno) {
        _ = try retryingOnInterrupt { flock(self.rawValue, operation) }
    }

    /// `ioctl(2)` for requests that take no argument, such as `TIOCEXCL`.
    ///
    /// C's `ioctl` is variadic, which Swift cannot call; Glibc's overlay offers this
    /// two-argument form with the request as `UInt`.
    func ioctl(_ request: CInt) throws(Errno) {
        _ = try retryingOnInterrupt { Glibc.ioctl(self.rawValue, UInt(bitPattern: Int(request))) }
    }

    /// `fcntl(F_GETFL)`: the open file's status flags, such as `O_NONBLOCK`.
    func statusFlags() throws(Errno) -> CInt {
        try retryingOnInterrupt { fcntl(self.rawValue, F_GETFL) }
    }

    /// `fcntl(F_SETFL)`.
    func setStatusFlags(_ flags: CInt) throws(Errno) {
        _ = try retryingOnInterrupt { fcntl(self.rawValue, F_SETFL, flags) }
    }

    /// `tcgetattr(3)`.
    func terminalAttributes() throws(Errno) -> termios {
        var attributes = termios()
        _ = try retryingOnInterrupt { tcgetattr(self.rawValue, &attributes) }
        return attributes
    }

    /// `tcsetattr(3)` with `TCSANOW`.
    ///
    /// `tcsetattr` succeeds if it applied *any* of the changes, so callers that need every
    /// setting read the attributes back and compare.
    func setTerminalAttributes(_ attributes: termios) throws(Errno) {
        var attributes = attributes
        _ = try retryingOnInterrupt { tcsetattr(self.rawValue, TCSANOW, &attributes) }
    }

    /// `tcflush(3)`, e.g. with `TCIOFLUSH` to drop bytes received and not yet read.
    func flushTerminal(_ queue: CInt) throws(Errno) {
        _ = try retryingOnInterrupt { tcflush(self.rawValue, queue) }
    }
}
