import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// stderr: the error message, `-v`'s trace, the progress bar, a responder's log.
///
/// Written through a non-blocking descriptor of its own (``BoundedWriter/reopening(_:)``), so a
/// reader that is behind (a pipe nobody reads, a terminal stopped with Ctrl-S) is waited for
/// only until the run must end: the run's `--timeout` (``waitNoLongerThan(_:)``) or a SIGINT or
/// SIGTERM (``stopWaiting()``). After that, what stderr does not take at once is dropped: nobody
/// is reading it, and the exit status still says how the run ended. Until then it waits as long
/// as it takes. Before 2026-12-07 a `-v` trace into a pipe nobody read blocked the link's event
/// loop for ever: past `--timeout`, and past SIGTERM.
enum StandardError {
    /// Opened on first use.
    private static let writer = BoundedWriter.reopening(2)
    /// When writes stop waiting for room; `nil`: never.
    private static let limit = Mutex<ContinuousClock.Instant?>(nil)

    /// Writes `text`; a failure is ignored: there is nowhere left to report it.
    static func write(_ text: String) {
        var text = text
        let deadline = Self.limit.withLock { $0 }
        text.withUTF8 { bytes in
            // The limit is read again while waiting: a signal may come in the middle of a write.
            try? Self.writer.write(UnsafeRawBufferPointer(bytes), deadline: deadline) {
                Self.limit.withLock { $0 }.map { ContinuousClock.now >= $0 } ?? false
            }
        }
    }

    /// Waits for stderr's reader no later than `deadline` (the run's `--timeout`).
    static func waitNoLongerThan(_ deadline: ContinuousClock.Instant) {
        Self.limit.withLock { limit in limit = min(limit ?? deadline, deadline) }
    }

    /// Waits for stderr's reader no more: the run was told to stop (SIGINT, SIGTERM).
    static func stopWaiting() {
        Self.waitNoLongerThan(.now)
    }

    static var isTerminal: Bool { isatty(2) == 1 }
}

enum StandardOutput {
    /// Opened on first use (never by `serve --device stdio`, whose stdout is the link).
    private static let writer = BoundedWriter.reopening(1)

    /// Writes bytes to stdout, giving up once `deadline` passes or the task is cancelled while
    /// stdout takes nothing (a pipe nobody reads); fails if stdout is closed (a pipe whose
    /// reader left).
    static func write(_ bytes: UnsafeRawBufferPointer, deadline: ContinuousClock.Instant?) throws(BoundedIOError) {
        try self.writer.write(bytes, deadline: deadline)
    }

    static func write(_ text: String, deadline: ContinuousClock.Instant?) throws(BoundedIOError) {
        var text = text
        // withUTF8 rethrows untyped errors: carry the typed one out in a Result.
        try text.withUTF8 { bytes in
            Result { () throws(BoundedIOError) in
                try self.writer.write(UnsafeRawBufferPointer(bytes), deadline: deadline)
            }
        }.get()
    }

    /// Writes text to stdout with no deadline; a failure (the reader left) is ignored.
    static func write(_ text: String) {
        try? self.write(text, deadline: nil)
    }
}
