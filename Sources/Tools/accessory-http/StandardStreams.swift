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
/// SIGTERM (``stopWaiting()``); the run's last message gets a short grace beyond that. After
/// that, what stderr does not take at once is dropped: nobody is reading it, and the exit status
/// still says how the run ended. Until then it waits as long as it takes (a cancelled task's
/// line too: only the limit ends the wait). Before 2026-12-07 a `-v` trace into a pipe nobody
/// read blocked the link's event loop for ever: past `--timeout`, and past SIGTERM.
enum StandardError {
    /// Opened on first use.
    private static let lines = LineWriter(BoundedWriter.reopening(2))

    /// Writes `text`; a failure is ignored: there is nowhere left to report it.
    ///
    /// - Parameter grace: for the run's last message, how long past the limit it may still wait
    ///   (a reader that is slow but there, such as `less`, still gets it).
    static func write(_ text: String, grace: Duration = .zero) {
        Self.lines.write(text, grace: grace)
    }

    /// How long past the limit the run's last message (the error, "interrupted") may still wait
    /// for a stderr that is behind.
    static let lastMessageGrace = Duration.milliseconds(250)

    /// Waits for stderr's reader no later than `deadline` (the run's `--timeout`).
    static func waitNoLongerThan(_ deadline: ContinuousClock.Instant) {
        Self.lines.waitNoLongerThan(deadline)
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
        if StandardDescriptors.wasClosed(1) { throw .failed(errno: EBADF) }
        try self.writer.write(bytes, deadline: deadline)
    }

    static func write(_ text: String, deadline: ContinuousClock.Instant?) throws(BoundedIOError) {
        var text = text
        // withUTF8 rethrows untyped errors: carry the typed one out in a Result.
        try text.withUTF8 { bytes in
            Result { () throws(BoundedIOError) in
                try self.write(UnsafeRawBufferPointer(bytes), deadline: deadline)
            }
        }.get()
    }

    /// Writes text to stdout with no deadline (`list`, `status`, `trust --list`). A reader that
    /// left (`| head -1`) is ignored, as a pipeline expects; a stdout closed at start is an
    /// error, as the body's is.
    static func write(_ text: String) throws(CLIError) {
        do {
            try self.write(text, deadline: nil)
        } catch .failed(errno: EBADF) where StandardDescriptors.wasClosed(1) {
            throw CLIError(.file, "cannot write stdout: it was closed when accessory-http started (>&-)")
        } catch {
            return
        }
    }
}

/// stdin, stdout and stderr as this process was started with them.
enum StandardDescriptors {
    /// Bit N: descriptor N was closed when the process started.
    private static let closedAtStart = Atomic<Int>(0)

    /// Opens `/dev/null` onto each of descriptors 0, 1 and 2 that the process was started
    /// without (`2>&-`, a spawner that closed them). Otherwise the next descriptor opened takes
    /// the lowest free number (NIO's eventfd or epoll, a device's socket or tty, the `-o` file),
    /// and the error message, the `-v` trace or the body would be written into it (a serial line
    /// or a socket would carry them to the device), and `-d @-` would read from it. Reading stdin
    /// and writing stdout then fail as curl's do (``wasClosed(_:)``); stderr's text is dropped.
    static func reserve() {
        var closed = 0
        for descriptor in CInt(0)...2 where fcntl(descriptor, F_GETFD) < 0 && errno == EBADF {
            closed |= 1 << descriptor
            // open returns the lowest free number: this one, as the lower ones are open by now.
            let opened = open("/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY)
            if opened >= 0 && opened != descriptor { close(opened) }
        }
        Self.closedAtStart.store(closed, ordering: .relaxed)
    }

    /// `--device stdio` carries the link on stdin and stdout: refused when either was closed at
    /// start (it would be `/dev/null` now, which the transport would refuse with less to say).
    static func requireStdioLink() throws(CLIError) {
        let closed = [(0, "stdin", "<&-"), (1, "stdout", ">&-")].filter { Self.wasClosed(CInt($0.0)) }
        guard let first = closed.first else { return }
        throw CLIError(
            .usage,
            "--device stdio carries the link on stdin and stdout, but \(first.1) was closed when accessory-http started (\(first.2)): give it the link's end"
        )
    }

    /// Whether `descriptor` (0, 1 or 2) was closed when the process started.
    static func wasClosed(_ descriptor: CInt) -> Bool {
        Self.closedAtStart.load(ordering: .relaxed) & (1 << descriptor) != 0
    }
}
