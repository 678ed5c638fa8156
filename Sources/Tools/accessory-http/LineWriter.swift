import Synchronization

/// Writes lines of text to a descriptor whose reader may be behind (stderr), waiting for room
/// only until a limit, and keeping lines whole: one write at a time, and a line after one that
/// went out only in part starts on a line of its own.
final class LineWriter: Sendable {
    private struct State {
        /// When writes stop waiting for room; `nil`: never.
        var limit: ContinuousClock.Instant?
        /// The last write that put anything out stopped inside a line: the next one starts on a
        /// line of its own.
        var cutShort = false
    }

    private let writer: BoundedWriter
    private let state = Mutex(State())
    /// One write at a time: a non-blocking descriptor takes part of a line when it is nearly
    /// full, and another thread's line must not land in the middle of it.
    private let writing = Mutex(())

    init(_ writer: BoundedWriter) {
        self.writer = writer
    }

    /// Writes `text`; a failure is ignored: there is nowhere left to report it.
    ///
    /// - Parameter grace: how long past the limit this text may still wait.
    func write(_ text: String, grace: Duration = .zero) {
        self.writing.withLock { _ in
            var text = text
            let cutShort = self.state.withLock { $0.cutShort }
            if cutShort && !text.hasPrefix("\n") { text = "\n" + text }
            let started = ContinuousClock.now
            let limit = { () -> ContinuousClock.Instant? in
                self.state.withLock { $0.limit }.map { max($0, started + grace) }
            }
            let deadline = limit()
            var count = 0
            let whole: Bool = text.withUTF8 { bytes in
                do {
                    // The limit is read again while waiting: a signal may come in the middle.
                    try self.writer.write(
                        UnsafeRawBufferPointer(bytes),
                        deadline: deadline,
                        stopWaiting: { limit().map { ContinuousClock.now >= $0 } ?? false },
                        written: &count
                    )
                    return true
                } catch {
                    return false
                }
            }
            // The last line is cut short when part of this text went out and that part did not
            // end a line; a text of which nothing went out leaves it as it was (before
            // 2026-12-07 it set the mark, and a line nobody had cut got a blank line after it).
            if whole {
                self.state.withLock { $0.cutShort = false }
            } else if count > 0 {
                let last = text.utf8[text.utf8.index(text.utf8.startIndex, offsetBy: count - 1)]
                self.state.withLock { $0.cutShort = last != UInt8(ascii: "\n") }
            }
        }
    }

    /// Waits for the reader no later than `deadline`; an earlier limit stays.
    func waitNoLongerThan(_ deadline: ContinuousClock.Instant) {
        self.state.withLock { state in state.limit = min(state.limit ?? deadline, deadline) }
    }
}
