import NIOCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Where `-o FILE` writes a response body.
///
/// A regular (or new) destination is written through a temporary file beside it, renamed into
/// place only by ``commit()``, so a failed or refused download never leaves a truncated file that
/// looks whole. The temporary file has a random name, is opened
/// `O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC` (a file or symlink planted at that name is
/// never followed or reused) with mode 0600 until the rename; then it gets the mode of the file
/// it replaces, or for a new file 0666 less the umask (as curl does). A destination that exists
/// and is not a regular file (`/dev/null`, a FIFO) is written directly.
final class OutputFile: Sendable {
    /// The user's path.
    let path: String
    /// The file being written: the temporary file, or `path` itself when written directly.
    let writtenPath: String
    private let writer: BoundedWriter
    private var descriptor: CInt { self.writer.descriptor }
    private let finalMode: mode_t?

    /// Opens the output for `path`, waiting (until `deadline`, or the task's cancellation) for
    /// a FIFO destination to get a reader; `timeout` is `--timeout`, for the message.
    static func open(path: String, deadline: ContinuousClock.Instant?, timeout: Double?) async throws(CLIError)
        -> OutputFile
    {
        while true {
            if let file = try OutputFile(path: path, readerless: .retry) { return file }
            // A FIFO without a reader: opening it blocking would wait for one for ever, past
            // any deadline. Try again every 20 ms (as a writer polling for a reader would).
            if let deadline, ContinuousClock.now >= deadline {
                let limit = timeout.map { " (\($0.formatted) s)" } ?? ""
                throw CLIError(
                    .timeout,
                    "the exchange took longer than its timeout\(limit): nothing opened the FIFO \(path) for reading"
                )
            }
            do {
                try await Task.sleep(for: .milliseconds(20))
            } catch {
                throw RunDeadline.error(.cancelled, writing: .file(path), timeout: timeout)
            }
        }
    }

    /// Opens the output for `path`. `temporaryName` makes the temporary file's name from the
    /// destination's path (tests plant files there); a name that exists is never opened, another is tried.
    convenience init(path: String, temporaryName: @escaping (String) -> String = OutputFile.randomTemporaryName)
        throws(CLIError)
    {
        guard let file = try OutputFile(path: path, readerless: .fail, temporaryName: temporaryName) else {
            throw Self.error("cannot write \(path)")
        }
        self.init(taking: file)
    }

    /// What to do with a FIFO destination that has no reader.
    enum Readerless { case retry, fail }

    private init(taking file: OutputFile) {
        (self.path, self.writtenPath, self.writer, self.finalMode) = (
            file.path, file.writtenPath, file.writer, file.finalMode
        )
    }

    /// `nil` when `path` is a FIFO that has no reader (with `.retry`).
    private init?(
        path: String,
        readerless: Readerless,
        temporaryName: (String) -> String = OutputFile.randomTemporaryName
    ) throws(CLIError) {
        self.path = path
        var info = stat()
        let exists = stat(path, &info) == 0
        if exists && (info.st_mode & S_IFMT) != S_IFREG {
            // Not blocking: a FIFO's open would wait for a reader, a tty's writes for Ctrl-Q.
            let descriptor = Glibc.open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
            if descriptor < 0 && errno == ENXIO && readerless == .retry && (info.st_mode & S_IFMT) == S_IFIFO {
                return nil
            }
            guard descriptor >= 0 else { throw Self.error("cannot write \(path)") }
            (self.writer, self.writtenPath, self.finalMode) = (BoundedWriter(plain: descriptor), path, nil)
            return
        }
        self.finalMode = exists ? info.st_mode & 0o777 : 0o666 & ~Self.currentUmask()
        for _ in 0..<16 {
            let candidate = temporaryName(path)
            let descriptor = Glibc.open(candidate, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if descriptor >= 0 {
                (self.writer, self.writtenPath) = (BoundedWriter(plain: descriptor), candidate)
                return
            }
            if errno != EEXIST { throw Self.error("cannot write \(path)") }
        }
        throw CLIError(
            .file,
            "cannot write \(path): every temporary name tried beside it already exists; remove stale *.accessory-http-*.part files there"
        )
    }

    /// `PATH.accessory-http-RANDOM.part`: in the destination's directory, so the final rename
    /// never crosses file systems; 64 random bits, so it cannot be guessed in advance.
    static func randomTemporaryName(for path: String) -> String {
        "\(path).accessory-http-\(String(UInt64.random(in: 0 ... .max), radix: 16)).part"
    }

    /// Appends `buffer`, giving up once `deadline` passes while the destination takes nothing
    /// (a FIFO nobody reads); `timeout` is `--timeout`, for the message.
    func write(_ buffer: ByteBuffer, deadline: ContinuousClock.Instant? = nil, timeout: Double? = nil) throws(CLIError)
    {
        do {
            try buffer.withUnsafeReadableBytes { (bytes) throws(BoundedIOError) in
                try self.writer.write(bytes, deadline: deadline)
            }
        } catch {
            throw RunDeadline.error(error, writing: .file(self.path), timeout: timeout)
        }
    }

    /// Gives the temporary file its final mode and renames it into place (or just closes a
    /// destination written directly).
    func commit() throws(CLIError) {
        guard let mode = self.finalMode else {
            _ = close(self.descriptor)
            return
        }
        if fchmod(self.descriptor, mode) != 0 {
            let error = Self.error("cannot set the mode of \(self.path) to \(String(mode, radix: 8))")
            self.discard()
            throw error
        }
        if close(self.descriptor) != 0 {
            let error = Self.error("cannot write \(self.path)")
            _ = unlink(self.writtenPath)
            throw error
        }
        if rename(self.writtenPath, self.path) != 0 {
            let error = Self.error("cannot move the download into place at \(self.path)")
            _ = unlink(self.writtenPath)
            throw error
        }
    }

    /// Closes the output and removes the temporary file: the destination is left as it was.
    func discard() {
        _ = close(self.descriptor)
        if self.finalMode != nil { _ = unlink(self.writtenPath) }
    }

    private static func error(_ what: String) -> CLIError {
        CLIError(.file, "\(what): \(String(cString: strerror(errno)))")
    }

    /// The process's umask (read by setting it and putting it back; the CLI has no other thread
    /// creating files at this point).
    private static func currentUmask() -> mode_t {
        let mask = umask(0o022)
        umask(mask)
        return mask
    }
}
