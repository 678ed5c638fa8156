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
    private let descriptor: Int32
    private let finalMode: mode_t?

    /// Opens the output for `path`. `temporaryName` makes the temporary file's name from the
    /// destination's path (tests plant files there); a name that exists is never opened, another is tried.
    init(path: String, temporaryName: (String) -> String = OutputFile.randomTemporaryName) throws(CLIError) {
        self.path = path
        var info = stat()
        let exists = stat(path, &info) == 0
        if exists && (info.st_mode & S_IFMT) != S_IFREG {
            let descriptor = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY)
            guard descriptor >= 0 else { throw Self.error("cannot write \(path)") }
            (self.descriptor, self.writtenPath, self.finalMode) = (descriptor, path, nil)
            return
        }
        self.finalMode = exists ? info.st_mode & 0o777 : 0o666 & ~Self.currentUmask()
        for _ in 0..<16 {
            let candidate = temporaryName(path)
            let descriptor = open(candidate, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if descriptor >= 0 {
                (self.descriptor, self.writtenPath) = (descriptor, candidate)
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

    /// Appends `buffer`.
    func write(_ buffer: ByteBuffer) throws(CLIError) {
        let failed = buffer.withUnsafeReadableBytes { bytes -> Bool in
            guard let base = bytes.baseAddress else { return false }
            var offset = 0
            while offset < bytes.count {
                let count = Glibc.write(self.descriptor, base + offset, bytes.count - offset)
                if count < 0 {
                    if errno == EINTR { continue }
                    return true
                }
                offset += count
            }
            return false
        }
        if failed { throw Self.error("cannot write \(self.path)") }
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
