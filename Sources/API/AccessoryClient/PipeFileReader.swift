import AccessoryHTTP1
import AccessoryTransport
import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Reads a file whose bytes come from a writer (a FIFO, a character device) for a streamed
/// request body, in a way that neither takes a thread of NIO's pool while the writer is quiet
/// nor outlives the caller's cancellation.
///
/// Why: `NonBlockingFileIO.read` blocks one of NIO's pool threads in `read(2)` until the writer
/// sends something, and nothing cancels it. That pool has one thread per core and carries every
/// file transfer of the process, so two bodies from quiet pipes on a two-core machine stopped
/// every other upload and download (until 2026-12-06 this reader waited on that pool, too).
/// Each piece (up to 256 KiB: what the pipe holds once it is ready) is now read on a thread of
/// its own, waiting in `poll(2)` 100 ms at a time and looking at the cancellation in between. Not NIO's event loop: its pipe channel takes a
/// hang-up for a certain end of file and traps (`preconditionFailure` in `readEOF0`) when the
/// read after it finds no data, which a FIFO whose next writer has just opened it gives.
enum PipeFileReader {
    /// The most one thread reads before it hands its bytes on.
    static let pieceSize = 262_144
    /// `F_SETPIPE_SZ` and `F_GETPIPE_SZ` (linux/fcntl.h: F_LINUX_SPECIFIC_BASE + 7 and + 8),
    /// which Glibc's module lacks.
    private static let setPipeSize: CInt = 1031
    private static let getPipeSize: CInt = 1032

    /// Calls `each` with every piece read from `handle` (never an empty one) until the end of
    /// the file. Throws `CancellationError` when the calling task is cancelled first, and the
    /// read's error when a read fails. `handle` stays open; the caller closes it.
    static func readAll(_ handle: NIOFileHandle, each: (ByteBuffer) async throws -> Void) async throws {
        // The descriptor outlives every read: the caller closes `handle` after this returns,
        // and this returns only once the reading thread has.
        let descriptor = try handle.withUnsafeFileDescriptor { $0 }
        // A pipe holds 64 KiB by default, so a read takes at most that, and every read costs a
        // thread: 16 384 of them per GiB. Grown to what an unprivileged process may ask for
        // (1 MiB, /proc/sys/fs/pipe-max-size), it lets a fast writer get ahead and a read take a
        // whole piece. Best effort: a character device or socket has no such size, and a
        // shrink below what the pipe holds fails, both harmlessly.
        // Only ever grown: a writer may have made it larger, and shrinking it is not ours to do.
        let size = fcntl(descriptor, Self.getPipeSize)
        if size >= 0 && size < Self.pieceSize * 4 {
            _ = fcntl(descriptor, Self.setPipeSize, CInt(Self.pieceSize * 4))
        }
        while true {
            let (piece, atEnd) = try await Self.read(descriptor, upTo: Self.pieceSize)
            if piece.readableBytes > 0 { try await each(piece) }
            if atEnd { return }
        }
    }

    /// One piece, read on a new thread, and whether the end of the file came after it.
    private static func read(_ descriptor: CInt, upTo count: Int) async throws -> (ByteBuffer, atEnd: Bool) {
        let cancelled = CancelFlag()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                do {
                    try DetachedThread.start {
                        continuation.resume(
                            with: Result { try Self.readWhenReady(descriptor, upTo: count, unless: cancelled) }
                        )
                    }
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        } onCancel: {
            cancelled.set()
        }
    }

    private static func readWhenReady(_ descriptor: CInt, upTo count: Int, unless cancelled: CancelFlag) throws
        -> (ByteBuffer, atEnd: Bool)
    {
        while true {
            if cancelled.isSet { throw CancellationError() }
            var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let polled = poll(&ready, 1, 100)
            if polled < 0 && errno != EINTR { throw IOError(errnoCode: errno, reason: "poll") }
            guard polled > 0 else { continue }
            var buffer = ByteBufferAllocator().buffer(capacity: count)
            // Reads until the piece is full or the pipe is empty for now (polled again without
            // waiting before each further read, so that a descriptor that blocks despite
            // O_NONBLOCK cannot hold the thread): with a writer ahead, one thread carries a whole
            // piece. The end of the file is reported with the bytes before it: read again, it
            // might not come back (a terminal's ^D is used up; a FIFO's next writer may open).
            while buffer.readableBytes < count {
                if buffer.readableBytes > 0 {
                    var more = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                    if poll(&more, 1, 0) <= 0 { break }
                }
                let wanted = count - buffer.readableBytes
                var got = 0
                buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: wanted) { space in
                    got = Glibc.read(descriptor, space.baseAddress, wanted)
                    return max(0, got)
                }
                if got > 0 { continue }
                if got == 0 { return (buffer, atEnd: true) }
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { break }
                throw IOError(errnoCode: errno, reason: "read")
            }
            if buffer.readableBytes > 0 { return (buffer, atEnd: false) }
        }
    }
}

/// Set once, from the cancellation handler; read by the reading thread.
private final class CancelFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { self.value.load(ordering: .relaxed) }
    func set() { self.value.store(true, ordering: .relaxed) }
}

/// Sends a file body's pieces to the link, counting them against the length the request
/// announced (a file that grows or shrinks while it is sent is an error, not a wrong body).
struct FileBodyPump {
    let path: String
    let length: Int?
    let writer: RequestBodyWriter
    let progress: (@Sendable (TransferProgress) -> Void)?
    private(set) var sent: Int64 = 0
    /// True while a piece is with the link: an error then is the link's, not the file's.
    private(set) var isWriting = false

    init(path: String, length: Int?, writer: RequestBodyWriter, progress: (@Sendable (TransferProgress) -> Void)?) {
        self.path = path
        self.length = length
        self.writer = writer
        self.progress = progress
    }

    mutating func send(_ piece: ByteBuffer) async throws {
        if let length, self.sent + Int64(piece.readableBytes) > Int64(length) {
            throw AccessoryClientError(.fileError, "\(self.path) grew while it was being sent")
        }
        self.isWriting = true
        try await self.writer.write(piece)
        self.isWriting = false
        self.sent += Int64(piece.readableBytes)
        self.progress?(TransferProgress(bytesTransferred: self.sent, totalBytes: self.length.map(Int64.init)))
    }
}
