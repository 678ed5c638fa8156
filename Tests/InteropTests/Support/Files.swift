import AccessoryCrypto
import AccessoryTestSupport
import Glibc

/// An error a test fixture throws with a message that says what went wrong.
struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A fresh directory under /tmp (short, so unix socket paths fit in 108 bytes), removed with
/// everything in it by ``remove()``.
final class TemporaryDirectory: Sendable {
    let root: String

    init(_ prefix: String) throws {
        var template = Array("/tmp/\(prefix).XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) != nil }) else {
            throw TestFailure("mkdtemp failed: \(String(cString: strerror(errno)))")
        }
        self.root = cString(template)
    }

    func path(_ name: String) -> String { "\(self.root)/\(name)" }

    func makeDirectory(_ name: String) throws -> String {
        let path = self.path(name)
        guard mkdir(path, 0o755) == 0 else { throw TestFailure("mkdir \(path): \(String(cString: strerror(errno)))") }
        return path
    }

    func remove() {
        // nftw would do; rm -rf is simpler and this only ever runs on our own mkdtemp result.
        guard self.root.hasPrefix("/tmp/"), !self.root.contains("..") else { return }
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/rm"), strdup("-rf"), strdup(self.root), nil]
        defer { argv.forEach { free($0) } }
        if posix_spawn(&pid, "/bin/rm", nil, nil, argv, environ) == 0 {
            var status: CInt = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        }
    }
}

/// The text of a NUL-terminated C string held in an array.
func cString(_ characters: [CChar]) -> String {
    String(decoding: characters.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

func writeFile(_ path: String, _ bytes: [UInt8]) throws {
    guard let file = fopen(path, "wb") else {
        throw TestFailure("cannot create \(path): \(String(cString: strerror(errno)))")
    }
    defer { fclose(file) }
    let written = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
    guard written == bytes.count else { throw TestFailure("short write to \(path)") }
}

func readFile(_ path: String) throws -> [UInt8] {
    guard let file = fopen(path, "rb") else {
        throw TestFailure("cannot open \(path): \(String(cString: strerror(errno)))")
    }
    defer { fclose(file) }
    var result: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        let count = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
        if count == 0 { break }
        result.append(contentsOf: chunk[0..<count])
    }
    return result
}

func sha256(_ bytes: some Sequence<UInt8>) -> String { Digest.hex(.sha256, of: bytes) }

/// Whether something at `path` accepts unix stream connections.
func unixSocketAccepts(_ path: String) -> Bool {
    guard let fd = connectUnixSocket(path) else { return false }
    close(fd)
    return true
}

/// Polls `condition` every 20 ms until it holds or `timeout` passes.
func waitUntil(timeout: Duration, _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return condition()
}

/// Runs `operation`, failing with a message if it takes longer than `timeout` (the operation
/// is cancelled then).
func withTimeout<T: Sendable>(
    _ timeout: Duration,
    _ what: String,
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw TestFailure("\(what) did not finish within \(timeout)")
        }
        return value
    }
}
