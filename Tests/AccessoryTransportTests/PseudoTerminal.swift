import Glibc
import Testing

/// A pty pair for serial tests: the test plays the accessory on the master side while the
/// transport opens the slave by its path, as it would open /dev/ttyACM0.
final class PseudoTerminal {
    let master: CInt
    let slavePath: String

    init() throws {
        // /dev/ptmx is what posix_openpt opens on Linux; posix_openpt, grantpt, unlockpt and
        // ptsname_r are hidden from Swift's Glibc module (no _XOPEN_SOURCE/_GNU_SOURCE), so
        // the latter two are looked up at run time. grantpt is a no-op with devpts.
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard master >= 0 else { throw PseudoTerminalError("open /dev/ptmx", errno) }
        guard let unlock = Self.unlockpt, let name = Self.ptsname_r else {
            close(master)
            throw PseudoTerminalError("dlsym unlockpt/ptsname_r", ENOSYS)
        }
        var path = [CChar](repeating: 0, count: 128)
        guard unlock(master) == 0, name(master, &path, path.count) == 0 else {
            let code = errno
            close(master)
            throw PseudoTerminalError("unlockpt/ptsname_r", code)
        }
        self.master = master
        self.slavePath = String(decoding: path.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static let unlockpt = dlsym(nil, "unlockpt").map {
        unsafeBitCast($0, to: (@convention(c) (CInt) -> CInt).self)
    }
    private static let ptsname_r = dlsym(nil, "ptsname_r").map {
        unsafeBitCast($0, to: (@convention(c) (CInt, UnsafeMutablePointer<CChar>?, Int) -> CInt).self)
    }

    deinit { close(self.master) }

    func write(_ text: String) {
        let written = text.utf8CString.withUnsafeBufferPointer {
            Glibc.write(self.master, $0.baseAddress, $0.count - 1)
        }
        #expect(written == text.utf8.count)
    }

    /// Reads what arrives on the master within `timeout`, until `expected` bytes came.
    func read(expected: Int, timeout: Duration = .seconds(3)) -> String {
        var bytes: [UInt8] = []
        let deadline = ContinuousClock.now + timeout
        while bytes.count < expected, ContinuousClock.now < deadline {
            var poller = pollfd(fd: self.master, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 50) == 1 else { continue }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = chunk.withUnsafeMutableBytes { Glibc.read(self.master, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

struct PseudoTerminalError: Error, CustomStringConvertible {
    let description: String
    init(_ call: String, _ code: CInt) { self.description = "\(call) failed: \(String(cString: strerror(code)))" }
}
