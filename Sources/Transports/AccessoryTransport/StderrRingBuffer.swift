import NIOCore
import Synchronization

/// Keeps the last `capacity` bytes a child process wrote to its stderr: the end is where the
/// reason it failed usually is, and a chatty child must not grow memory without bound.
final class StderrRingBuffer: Sendable {
    let capacity: Int
    private let state = TrackedMutex(State())

    private struct State {
        var bytes: [UInt8] = []
        var droppedSome = false
        var ended = false
    }

    init(capacity: Int = 4096) {
        self.capacity = capacity
    }

    func append(_ buffer: ByteBuffer) {
        let capacity = self.capacity
        self.state.withLock { state in
            // Only the tail of a large chunk can survive, so copy only that.
            let incoming = buffer.readableBytesView
            if incoming.count > capacity { state.droppedSome = true }
            state.bytes.append(contentsOf: incoming.suffix(capacity))
            if state.bytes.count > capacity {
                state.bytes.removeFirst(state.bytes.count - capacity)
                state.droppedSome = true
            }
        }
    }

    /// Records that the child's stderr reached end-of-file (or stopped being read).
    func markEnded() {
        self.state.withLock { $0.ended = true }
    }

    /// Whether ``markEnded()`` was called: no more text will arrive.
    var hasEnded: Bool { self.state.withLock { $0.ended } }

    /// The kept bytes as text (invalid UTF-8 replaced), without surrounding whitespace, with
    /// "…" in front if earlier output was dropped.
    var text: String {
        let (kept, droppedSome) = self.state.withLock { ($0.bytes, $0.droppedSome) }
        var text = Substring(String(decoding: kept, as: UTF8.self))
        while let first = text.first, first.isWhitespace { text.removeFirst() }
        while let last = text.last, last.isWhitespace { text.removeLast() }
        return (droppedSome ? "…" : "") + text
    }
}
