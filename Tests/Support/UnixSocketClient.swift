import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// A test's own client end of a unix stream socket, for the tests that talk to a listener byte
// by byte (a silent client, a slow one, a malformed request).

/// A stream socket connected to the unix socket at `path` (receives time out after
/// `timeoutSeconds`), or nil if nothing accepts there.
public func connectUnixSocket(_ path: String, timeoutSeconds: Int = 10) -> CInt? {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
        close(fd)
        return nil
    }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    guard result == 0 else {
        close(fd)
        return nil
    }
    var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    return fd
}

/// Everything read from `fd` until the peer closes (or a receive timeout), as text.
public func readToEnd(_ fd: CInt) -> String {
    var answer: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = read(fd, &buffer, buffer.count)
        if count <= 0 { break }
        answer += buffer[0..<count]
    }
    return String(decoding: answer, as: UTF8.self)
}

/// Runs blocking work on a thread outside Swift's cooperative pool (two threads on two cores):
/// a test that blocks there in `read` would starve the bridge it talks to.
public func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: body()) }
    }
}
