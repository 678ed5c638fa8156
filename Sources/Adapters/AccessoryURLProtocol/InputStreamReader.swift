import AccessoryTransport
import Dispatch
import Foundation
import NIOCore
import Synchronization

/// Reads an `InputStream` on a thread of its own, one piece per ``next()``, so that a stream
/// that blocks never holds a thread of Swift's cooperative pool and a cancelled caller ends at
/// once.
///
/// Why a thread: on Linux, FoundationNetworking's `InputStream` has no run-loop scheduling that
/// works for files and FIFOs, `hasBytesAvailable` stays `true` until the end, and `read` blocks
/// until the writer sends. Read from a task, a quiet pipe therefore held one of the pool's few
/// threads (two on a two-core machine) and the task past its deadline, as nothing can
/// interrupt `read`. Here the thread blocks instead; a cancelled ``next()`` returns at once and
/// the thread ends (closing the stream) as soon as its `read` returns, or at once if it was
/// waiting for the next request for a piece.
///
/// `@unchecked Sendable` proof: `stream` is used by the reading thread alone (open, read,
/// streamError, close), after being handed to it once by `init`; everything the thread and
/// the caller share is in `state` (a `Mutex`) or is `demand` (a semaphore, thread-safe).
final class InputStreamReader: @unchecked Sendable {
    /// What one read gave.
    enum Piece: Sendable {
        case bytes(ByteBuffer)
        case end
    }

    /// What became of a call to ``next()`` when it was made.
    private enum Request {
        case asked, atEnd, stopped
    }

    private struct State {
        var waiting: CheckedContinuation<Piece, any Error>?
        var stopped = false
        /// The thread read the end or an error and is gone: later calls get ``Piece/end``.
        var finished = false
    }

    private let stream: InputStream
    private let pieceSize: Int
    private let state = Mutex(State())
    /// One signal per piece asked for, and one from ``stop()``.
    private let demand = DispatchSemaphore(value: 0)

    /// Starts the reading thread; it opens the stream and waits for the first ``next()``.
    init(_ stream: InputStream, pieceSize: Int = 64 * 1024) throws(AccessoryURLProtocolError) {
        self.stream = stream
        self.pieceSize = pieceSize
        do {
            try DetachedThread.start { [self] in self.run() }
        } catch {
            throw AccessoryURLProtocolError(
                .invalidRequest,
                "could not start a thread to read the request's httpBodyStream: \(error)"
            )
        }
    }

    /// The next piece of the stream; ``Piece/end`` at its end. Throws `CancellationError` at
    /// once when the calling task is cancelled, and the stream's error when a read fails.
    func next() async throws -> Piece {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Piece, any Error>) in
                let outcome = self.state.withLock { state -> Request in
                    if state.finished { return .atEnd }
                    if state.stopped { return .stopped }
                    state.waiting = continuation
                    return .asked
                }
                switch outcome {
                case .atEnd: continuation.resume(returning: .end)
                case .stopped: continuation.resume(throwing: CancellationError())
                case .asked: self.demand.signal()
                }
            }
        } onCancel: {
            self.stop()
        }
    }

    /// Ends the reader: a waiting ``next()`` throws `CancellationError`, and the thread closes
    /// the stream and ends once it is not blocked in `read` any more. Idempotent.
    func stop() {
        let waiting = self.state.withLock { state -> CheckedContinuation<Piece, any Error>? in
            guard !state.stopped else { return nil }
            state.stopped = true
            defer { state.waiting = nil }
            return state.waiting
        }
        waiting?.resume(throwing: CancellationError())
        self.demand.signal()
    }

    private func run() {
        self.stream.open()
        defer { self.stream.close() }
        while true {
            self.demand.wait()
            if self.state.withLock({ $0.stopped }) { return }
            let result = self.readPiece()
            let waiting = self.state.withLock { state -> CheckedContinuation<Piece, any Error>? in
                if case .bytes = try? result.get() {} else { state.finished = true }
                defer { state.waiting = nil }
                return state.waiting
            }
            waiting?.resume(with: result)
            switch result {
            case .success(.bytes): continue
            case .success(.end), .failure: return
            }
        }
    }

    private func readPiece() -> Result<Piece, any Error> {
        var buffer = ByteBufferAllocator().buffer(capacity: self.pieceSize)
        var count = 0
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: self.pieceSize) { space in
            guard let base = space.baseAddress else { return 0 }
            count = self.stream.read(base.assumingMemoryBound(to: UInt8.self), maxLength: self.pieceSize)
            return max(0, count)
        }
        if count < 0 {
            let reason = self.stream.streamError.map { "\($0)" } ?? "unknown error"
            return .failure(
                AccessoryURLProtocolError(.invalidRequest, "reading the request's httpBodyStream failed: \(reason)")
            )
        }
        if count == 0 { return .success(.end) }
        // A short read (a pipe's line) is copied into a buffer of its size: the link's
        // back-pressure counts bytes, and many short pieces each holding 64 KiB would not be.
        if count < self.pieceSize / 4 { return .success(.bytes(ByteBuffer(bytes: buffer.readableBytesView))) }
        return .success(.bytes(buffer))
    }
}
