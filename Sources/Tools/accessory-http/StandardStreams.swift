#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

enum StandardError {
    /// Waits for a reader that is behind as long as it takes (stderr is seldom a pipe nobody
    /// reads); a failure is ignored: there is nowhere left to report it.
    static func write(_ text: String) {
        var text = text
        text.withUTF8 { try? BoundedWriter(plain: 2).write(UnsafeRawBufferPointer($0)) }
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
