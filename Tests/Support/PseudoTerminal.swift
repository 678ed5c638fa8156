import AccessoryTransport

#if canImport(Glibc)
    import Glibc
#endif

/// A pty pair opened the POSIX way: `posix_openpt`, `grantpt`, `unlockpt`, `ptsname_r`. The
/// test plays the accessory on the master; the host side opens the slave by its path, as it
/// would open /dev/ttyACM0.
///
/// Swift's Glibc module is imported without `_XOPEN_SOURCE`, which hides these four, so they
/// are looked up at run time.
public struct PseudoTerminal: Sendable {
    public let master: CInt
    public let slavePath: String

    private typealias OpenPT = @convention(c) (CInt) -> CInt
    private typealias PTOperation = @convention(c) (CInt) -> CInt
    private typealias PTSNameR = @convention(c) (CInt, UnsafeMutablePointer<CChar>?, Int) -> CInt

    private static func function<F>(_ name: String, _ type: F.Type) throws(TransportError) -> F {
        guard let symbol = dlsym(nil, name) else {
            throw TransportError(.openFailed, "\(name) is not in this C library")
        }
        return unsafeBitCast(symbol, to: type)
    }

    private static func failure(_ call: String, _ code: CInt = errno) -> TransportError {
        TransportError(.openFailed, "\(call): \(String(cString: strerror(code)))")
    }

    /// Opens a master (`O_RDWR | O_NOCTTY | O_CLOEXEC`) and puts the line in raw mode, so neither
    /// the line discipline's echo nor its newline and control-character handling touches the
    /// bytes (termios requests on a Linux pty master act on the shared slave settings).
    public static func open() throws(TransportError) -> PseudoTerminal {
        let posixOpenPT = try Self.function("posix_openpt", OpenPT.self)
        let grantPT = try Self.function("grantpt", PTOperation.self)
        let unlockPT = try Self.function("unlockpt", PTOperation.self)
        let ptsNameR = try Self.function("ptsname_r", PTSNameR.self)

        let master = posixOpenPT(O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard master >= 0 else { throw Self.failure("posix_openpt") }
        do throws(TransportError) {
            guard grantPT(master) == 0 else { throw Self.failure("grantpt") }
            guard unlockPT(master) == 0 else { throw Self.failure("unlockpt") }
            var name = [CChar](repeating: 0, count: 256)
            let result = name.withUnsafeMutableBufferPointer { ptsNameR(master, $0.baseAddress, $0.count) }
            guard result == 0 else { throw Self.failure("ptsname_r", result) }
            var attributes = termios()
            guard tcgetattr(master, &attributes) == 0 else { throw Self.failure("tcgetattr") }
            cfmakeraw(&attributes)
            guard tcsetattr(master, TCSANOW, &attributes) == 0 else { throw Self.failure("tcsetattr") }
            let path = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            return PseudoTerminal(master: master, slavePath: path)
        } catch {
            close(master)
            throw error
        }
    }
}
