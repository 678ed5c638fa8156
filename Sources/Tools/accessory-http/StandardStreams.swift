#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Writes to a file descriptor, retrying on EINTR and short writes.
enum RawOutput {
    @discardableResult
    static func write(_ fd: CInt, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard var base = bytes.baseAddress else { return true }
        var remaining = bytes.count
        while remaining > 0 {
            let written = Glibc.write(fd, base, remaining)
            if written < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK {
                    // A non-blocking descriptor (inherited: the flag belongs to the pipe, so a
                    // parent that set it sets it for us) whose reader is behind: wait until it
                    // takes more, rather than spin on a core until it does.
                    var ready = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&ready, 1, -1)
                    continue
                }
                return false
            }
            remaining -= written
            base += written
        }
        return true
    }
}

enum StandardError {
    static func write(_ text: String) {
        var text = text
        text.withUTF8 { _ = RawOutput.write(2, UnsafeRawBufferPointer($0)) }
    }

    static var isTerminal: Bool { isatty(2) == 1 }
}

enum StandardOutput {
    /// Writes bytes to stdout; `false` if stdout is closed (e.g. a pipe whose reader left).
    static func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        RawOutput.write(1, bytes)
    }

    static func write(_ text: String) {
        var text = text
        text.withUTF8 { _ = RawOutput.write(1, UnsafeRawBufferPointer($0)) }
    }
}
