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

/// Reads a file whose bytes come from a writer (a FIFO, a socket, a character device) for a
/// streamed request body, in a way that neither holds a thread while the writer is quiet nor
/// outlives the caller's cancellation.
///
/// Why: `NonBlockingFileIO.read` blocks one of NIO's pool threads in `read(2)` until the writer
/// sends something, and nothing cancels it. The pool has one thread per core and every file
/// transfer of the process shares it, so two bodies from quiet pipes on a two-core machine
/// stopped every other upload and download (before 2026-12-06, when the pool thread polled).
/// Here the descriptor is watched by the event loop (epoll), as a socket is: a wait costs no
/// thread, and a cancelled task stops waiting at once.
enum PipeFileReader {
    /// Calls `each` with every piece read from `handle` (never an empty one) until the end of
    /// the file. Throws `CancellationError` when the calling task is cancelled first, and the
    /// read's error when a read fails. `handle` stays open; the caller closes it.
    static func readAll(
        _ handle: NIOFileHandle,
        on eventLoop: any EventLoop,
        each: (ByteBuffer) async throws -> Void
    ) async throws {
        // epoll refuses a descriptor that is always ready (/dev/zero; NIO would trap on it):
        // such a file never makes a read wait, so the pool reads it.
        let watchable = try handle.withUnsafeFileDescriptor { ReadinessWatch.accepts($0) }
        guard watchable else {
            try await Self.readOnThePool(handle, on: eventLoop, each: each)
            return
        }
        // NIO takes ownership of what it watches: it gets a duplicate, so that `handle` stays
        // the caller's.
        let duplicate = try handle.withUnsafeFileDescriptor { descriptor in
            let duplicate = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
            if duplicate < 0 { throw IOError(errnoCode: errno, reason: "fcntl(F_DUPFD_CLOEXEC)") }
            return duplicate
        }
        let channel = try await NIOPipeBootstrap(group: eventLoop)
            .channelOption(
                .recvAllocator,
                value: AdaptiveRecvByteBufferAllocator(minimum: 4096, initial: 65536, maximum: 262_144)
            )
            .takingOwnershipOfDescriptor(input: duplicate) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, Never>(wrappingChannelSynchronously: channel)
                }
            }
        try await channel.executeThenClose { inbound, _ in
            for try await piece in inbound where piece.readableBytes > 0 {
                try await each(piece)
            }
        }
        // NIO's inbound sequence may end, rather than throw, when the task is cancelled: that
        // is not the end of the file.
        try Task.checkCancellation()
    }

    /// Reads on NIO's pool, the thread waiting in `poll(2)` 100 ms at a time and looking at the
    /// cancellation in between: for descriptors epoll refuses, which never make it wait.
    private static func readOnThePool(
        _ handle: NIOFileHandle,
        on eventLoop: any EventLoop,
        each: (ByteBuffer) async throws -> Void
    ) async throws {
        while true {
            let cancelled = CancelFlag()
            let piece = try await withTaskCancellationHandler {
                try await NIOThreadPool.singleton.runIfActive(eventLoop: eventLoop) {
                    try handle.withUnsafeFileDescriptor { descriptor in
                        try Self.readWhenReady(descriptor, upTo: 262_144, unless: cancelled)
                    }
                }.get()
            } onCancel: {
                cancelled.set()
            }
            if piece.readableBytes == 0 { return }
            try await each(piece)
        }
    }

    private static func readWhenReady(_ descriptor: CInt, upTo count: Int, unless cancelled: CancelFlag) throws
        -> ByteBuffer
    {
        while true {
            if cancelled.isSet { throw CancellationError() }
            var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let polled = poll(&ready, 1, 100)
            if polled < 0 && errno != EINTR { throw IOError(errnoCode: errno, reason: "poll") }
            guard polled > 0 else { continue }
            var buffer = ByteBufferAllocator().buffer(capacity: count)
            var got = 0
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { space in
                got = read(descriptor, space.baseAddress, count)
                return max(0, got)
            }
            if got >= 0 { return buffer }
            if errno == EINTR || errno == EAGAIN { continue }
            throw IOError(errnoCode: errno, reason: "read")
        }
    }
}

/// Set once, from the cancellation handler; read by the pool thread.
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
