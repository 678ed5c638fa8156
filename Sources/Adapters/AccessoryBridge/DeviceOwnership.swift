#if canImport(Glibc)
    import Glibc
#endif

/// One bridge per accessory: an exclusive `flock` on a lock file named after the device spec,
/// holding the owner's PID, so a second bridge on the same device is told who owns it (the
/// ipp-usb model). The lock goes with the process, however it ends.
public final class DeviceOwnership: Sendable {
    /// Where the lock files live: `/run/lock` (shared by every user on Debian), else `/tmp`.
    public static var directory: String {
        access("/run/lock", W_OK) == 0 ? "/run/lock" : "/tmp"
    }

    /// The lock file's path.
    public let path: String
    private let descriptor: CInt

    /// Takes the accessory `device` (a device spec) for this process.
    ///
    /// - Throws: ``BridgeError/Code/alreadyOwned`` naming the owner's PID when another process
    ///   holds it.
    public init(device: String, directory: String = DeviceOwnership.directory) throws(BridgeError) {
        let name = device.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "." ? $0 : "_" }
        let path = "\(directory)/accessory-http-bridge.\(String(name).prefix(120)).lock"
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw BridgeError(.bindFailed, "cannot create the lock file \(path): \(String(cString: strerror(errno)))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            var bytes = [UInt8](repeating: 0, count: 32)
            let count = read(descriptor, &bytes, bytes.count)
            close(descriptor)
            let owner = count > 0 ? String(decoding: bytes[0..<count], as: UTF8.self).filter(\.isNumber) : ""
            throw BridgeError(
                .alreadyOwned,
                "the accessory \(device) is already owned by PID \(owner.isEmpty ? "?" : owner) (another accessory-http bridge, lock \(path)); use that bridge's listeners, or stop it first"
            )
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = pwrite(descriptor, pid, pid.count, 0)
        self.path = path
        self.descriptor = descriptor
    }

    /// Gives the accessory up (the lock file stays, for the next owner to reuse).
    public func release() {
        _ = flock(self.descriptor, LOCK_UN)
    }

    deinit {
        close(self.descriptor)
    }
}
