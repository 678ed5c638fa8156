import NIOCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Why a ``BoundedWriter`` or ``BoundedReader`` stopped before it was done.
enum BoundedIOError: Error, Equatable {
    /// The descriptor failed (`EPIPE`: a writer's reader left; `ENOSPC`, `EIO`, …).
    case failed(errno: CInt)
    /// The caller's deadline passed while the descriptor was not ready.
    case deadlinePassed
    /// The task was cancelled (SIGINT, SIGTERM) while the descriptor was not ready.
    case cancelled

    /// `strerror` of a failure; a plain phrase for the other two.
    var reason: String {
        switch self {
        case .failed(let number): String(cString: strerror(number))
        case .deadlinePassed: "the deadline passed"
        case .cancelled: "cancelled"
        }
    }
}

/// Waits in `poll` for `events` on `descriptor`, in slices of at most 100 ms, checking
/// `deadline` and the current task's cancellation between them; `stopWaiting`, when given,
/// is asked instead of the task's cancellation. Returns once `poll` reports anything
/// (readiness, an error or a hang-up, which the next read or write reports).
func waitForReadiness(
    _ descriptor: CInt,
    _ events: CInt,
    deadline: ContinuousClock.Instant?,
    stopWaiting: (() -> Bool)? = nil
) throws(BoundedIOError) {
    while true {
        if stopWaiting?() ?? Task.isCancelled { throw .cancelled }
        var slice = 100
        if let deadline {
            let left = ContinuousClock.now.duration(to: deadline)
            if left <= .zero { throw .deadlinePassed }
            let (seconds, attoseconds) = left.components
            // Rounded up, so a wait never ends a little before the deadline and spins.
            let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
            slice = Int(min(Int64(slice), max(1, milliseconds)))
        }
        var ready = pollfd(fd: descriptor, events: Int16(events), revents: 0)
        let result = poll(&ready, 1, Int32(slice))
        if result > 0 { return }
        if result < 0 && errno != EINTR { throw .failed(errno: errno) }
    }
}

/// Writes to a descriptor that can block for ever — a pipe nobody reads, a terminal stopped
/// with Ctrl-S, a socket whose peer stopped reading — without waiting past the caller's
/// deadline, or on after the caller's task was cancelled.
///
/// A blocking `write` cannot be bounded: it returns when the reader takes the bytes. So the
/// writer uses a descriptor of its own that does not block: a pipe, FIFO or terminal is opened
/// again through `/proc/self/fd/N` with `O_NONBLOCK` (a new open file description: the flag is
/// never set on the one this process shares with its parent and siblings); a socket is written
/// with `send(…, MSG_DONTWAIT)`. When the descriptor is full the writer waits in `poll`, in
/// slices of at most 100 ms, checking the deadline and the task's cancellation between them.
/// Files and devices that never block for long (a regular file, `/dev/null`) are written as
/// they are. Where the reopen is refused (a pipe created by another user, no `/proc`), the
/// inherited descriptor is used; a blocking one then blocks as it always did.
struct BoundedWriter: Sendable {
    /// The descriptor written.
    let descriptor: CInt
    /// Written with `send(MSG_DONTWAIT)`: a socket (which `/proc` cannot reopen).
    private let isSocket: Bool

    /// Writes `descriptor` itself, as it is (blocking or not).
    init(plain descriptor: CInt) {
        self.descriptor = descriptor
        self.isSocket = false
    }

    private init(descriptor: CInt, isSocket: Bool) {
        self.descriptor = descriptor
        self.isSocket = isSocket
    }

    /// A writer for `descriptor` as this process inherited it (see the type's comment). The
    /// descriptor it may open stays open for the life of the process.
    static func reopening(_ descriptor: CInt) -> BoundedWriter {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return BoundedWriter(plain: descriptor) }
        switch info.st_mode & S_IFMT {
        case S_IFSOCK:
            return BoundedWriter(descriptor: descriptor, isSocket: true)
        case S_IFIFO:
            return Self.reopened(descriptor)
        case S_IFCHR where isatty(descriptor) == 1:
            return Self.reopened(descriptor)
        default:
            return BoundedWriter(plain: descriptor)
        }
    }

    private static func reopened(_ descriptor: CInt) -> BoundedWriter {
        let reopened = open("/proc/self/fd/\(descriptor)", O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        return BoundedWriter(plain: reopened >= 0 ? reopened : descriptor)
    }

    /// Writes every byte of `bytes`, retrying after `EINTR` and short writes; throws when the
    /// descriptor fails, `deadline` passes, or the current task is cancelled while the
    /// descriptor is full. `stopWaiting`, when given, decides instead of the task's cancellation
    /// (for code outside a task, such as a link's event loop, or a writer whose wait only a
    /// limit of its own ends). Without any of these, waits for the reader as long as it takes.
    func write(
        _ bytes: UnsafeRawBufferPointer,
        deadline: ContinuousClock.Instant? = nil,
        stopWaiting: (() -> Bool)? = nil
    ) throws(BoundedIOError) {
        var written = 0
        try self.write(bytes, deadline: deadline, stopWaiting: stopWaiting, written: &written)
    }

    /// The same, counting in `written` the bytes that went out, also when it throws.
    func write(
        _ bytes: UnsafeRawBufferPointer,
        deadline: ContinuousClock.Instant?,
        stopWaiting: (() -> Bool)?,
        written total: inout Int
    ) throws(BoundedIOError) {
        guard var base = bytes.baseAddress else { return }
        var remaining = bytes.count
        while remaining > 0 {
            let written =
                self.isSocket
                ? send(self.descriptor, base, remaining, CInt(MSG_DONTWAIT) | CInt(MSG_NOSIGNAL))
                : Glibc.write(self.descriptor, base, remaining)
            if written < 0 {
                let number = errno
                if number == EINTR { continue }
                guard number == EAGAIN || number == EWOULDBLOCK else { throw .failed(errno: number) }
                try waitForReadiness(self.descriptor, CInt(POLLOUT), deadline: deadline, stopWaiting: stopWaiting)
                continue
            }
            remaining -= written
            base += written
            total += written
        }
    }
}

/// Reads a descriptor to its end without waiting past the caller's deadline or on after the
/// caller's task was cancelled: before each read it waits in `poll` (``waitForReadiness(_:_:deadline:)``)
/// until there is something to read, so the read itself never blocks for long (a pipe or
/// terminal returns what it holds).
enum BoundedReader {
    /// Every byte up to end of file. A pipe, FIFO or terminal is read through a non-blocking
    /// descriptor of its own (reopened through `/proc/self/fd/N`, as ``BoundedWriter`` does):
    /// another reader of the same pipe that takes the bytes between `poll` and `read` cannot
    /// leave the read blocked.
    static func readAll(_ inherited: CInt, deadline: ContinuousClock.Instant?) throws(BoundedIOError) -> ByteBuffer {
        var info = stat()
        let kind = fstat(inherited, &info) == 0 ? info.st_mode & S_IFMT : 0
        var descriptor = inherited
        if kind == S_IFIFO || (kind == S_IFCHR && isatty(inherited) == 1) {
            let reopened = open("/proc/self/fd/\(inherited)", O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
            if reopened >= 0 { descriptor = reopened }
        }
        defer { if descriptor != inherited { close(descriptor) } }
        var buffer = ByteBuffer()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            try waitForReadiness(descriptor, CInt(POLLIN), deadline: deadline)
            let count = read(descriptor, &chunk, chunk.count)
            if count < 0 {
                let number = errno
                // EAGAIN: a non-blocking descriptor that poll woke for nothing (another reader
                // took the bytes); wait again.
                if number == EINTR || number == EAGAIN || number == EWOULDBLOCK { continue }
                throw .failed(errno: number)
            }
            if count == 0 { return buffer }
            buffer.writeBytes(chunk[0..<count])
        }
    }
}
