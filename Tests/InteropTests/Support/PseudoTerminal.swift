import Glibc

/// A pty pair opened the POSIX way: `posix_openpt`, `grantpt`, `unlockpt`, `ptsname_r`.
///
/// Swift's Glibc module is imported without `_XOPEN_SOURCE`, which hides these four, so they
/// are looked up at run time.
struct PseudoTerminal {
    let master: CInt
    let slavePath: String

    private typealias OpenPT = @convention(c) (CInt) -> CInt
    private typealias PTOperation = @convention(c) (CInt) -> CInt
    private typealias PTSNameR = @convention(c) (CInt, UnsafeMutablePointer<CChar>?, Int) -> CInt

    private static func function<F>(_ name: String, _ type: F.Type) throws -> F {
        guard let symbol = dlsym(nil, name) else { throw TestFailure("\(name) is not in this C library") }
        return unsafeBitCast(symbol, to: type)
    }

    /// Opens a master (`O_RDWR | O_NOCTTY | O_CLOEXEC`) and puts the line in raw mode, so neither
    /// the line discipline's echo nor its newline and control-character handling touches the
    /// bytes (termios requests on a Linux pty master act on the shared slave settings).
    static func open() throws -> PseudoTerminal {
        let posixOpenPT = try Self.function("posix_openpt", OpenPT.self)
        let grantPT = try Self.function("grantpt", PTOperation.self)
        let unlockPT = try Self.function("unlockpt", PTOperation.self)
        let ptsNameR = try Self.function("ptsname_r", PTSNameR.self)

        let master = posixOpenPT(O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard master >= 0 else { throw TestFailure("posix_openpt: \(String(cString: strerror(errno)))") }
        do {
            guard grantPT(master) == 0 else { throw TestFailure("grantpt: \(String(cString: strerror(errno)))") }
            guard unlockPT(master) == 0 else { throw TestFailure("unlockpt: \(String(cString: strerror(errno)))") }
            var name = [CChar](repeating: 0, count: 256)
            let result = name.withUnsafeMutableBufferPointer { ptsNameR(master, $0.baseAddress, $0.count) }
            guard result == 0 else { throw TestFailure("ptsname_r: \(String(cString: strerror(result)))") }
            var attributes = termios()
            guard tcgetattr(master, &attributes) == 0 else {
                throw TestFailure("tcgetattr: \(String(cString: strerror(errno)))")
            }
            cfmakeraw(&attributes)
            guard tcsetattr(master, TCSANOW, &attributes) == 0 else {
                throw TestFailure("tcsetattr: \(String(cString: strerror(errno)))")
            }
            return PseudoTerminal(master: master, slavePath: cString(name))
        } catch {
            close(master)
            throw error
        }
    }
}
