import AccessoryTransport
import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Reads a file that is not a regular one (a FIFO, a character device) for a streamed request
/// body, in a way the caller's cancellation ends within 100 ms.
///
/// Why: `NonBlockingFileIO.read` blocks one of NIO's pool threads in `read(2)` until the
/// writer sends something, and nothing cancels it; a body from a named pipe whose writer went
/// quiet then held the exchange past its deadline (the link cancels the body's producer at the
/// deadline and waits for it). Here the pool thread waits in `poll(2)` 100 ms at a time and
/// looks at the cancellation in between.
struct PipeFileReader: Sendable {
    let handle: NIOFileHandle
    let eventLoop: any EventLoop

    /// Up to `count` bytes; an empty buffer at the end of the file. Throws `CancellationError`
    /// when the calling task is cancelled while nothing has arrived.
    func read(upTo count: Int) async throws -> ByteBuffer {
        let cancelled = CancelFlag()
        let handle = self.handle
        return try await withTaskCancellationHandler {
            try await NIOThreadPool.singleton.runIfActive(eventLoop: self.eventLoop) {
                try handle.withUnsafeFileDescriptor { descriptor in
                    try Self.readWhenReady(descriptor, upTo: count, unless: cancelled)
                }
            }.get()
        } onCancel: {
            cancelled.set()
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
                got = Glibc.read(descriptor, space.baseAddress, count)
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
