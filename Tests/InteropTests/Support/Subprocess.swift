import Glibc

/// A helper process a test starts (nginx, socat, curl): spawned with `posix_spawn`, its stdout
/// and stderr written to a log file, and always stopped and reaped by ``stop()``.
final class Subprocess: @unchecked Sendable {
    let pid: pid_t
    let arguments: [String]
    let logPath: String
    private var reaped: CInt?

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, CInt) -> CInt
    /// glibc hides `posix_spawn_file_actions_addclosefrom_np` from Swift (no `_GNU_SOURCE`).
    private static let addCloseFrom: AddCloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np")
        .map { unsafeBitCast($0, to: AddCloseFrom.self) }

    /// Starts `arguments[0]` (an absolute path) with stdin from /dev/null and stdout+stderr
    /// appended to `logPath`. Descriptors other than 0, 1, 2 are closed in the child so it
    /// cannot keep another test's pty or socket alive.
    init(_ arguments: [String], logPath: String) throws {
        self.arguments = arguments
        self.logPath = logPath
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        if let addCloseFrom = Self.addCloseFrom { _ = addCloseFrom(&actions, 3) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // NIO ignores SIGPIPE in this process; an ignored signal stays ignored across exec.
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) }
        argv.append(nil)
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, environ)
        guard result == 0 else {
            throw TestFailure(
                "could not start \(arguments.joined(separator: " ")): \(String(cString: strerror(result)))"
            )
        }
        self.pid = pid
    }

    /// The exit status if the process has ended (it is then reaped), else `nil`.
    func poll() -> CInt? {
        if let reaped { return reaped }
        var status: CInt = 0
        let result = waitpid(self.pid, &status, WNOHANG)
        if result == self.pid {
            self.reaped = status
            return status
        }
        return nil
    }

    var isRunning: Bool { self.poll() == nil }

    /// Waits up to `timeout` for the process to exit on its own; returns its wait status.
    func wait(timeout: Duration) async -> CInt? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status = self.poll() { return status }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return self.poll()
    }

    /// SIGTERM, up to 2 s to exit, then SIGKILL; always reaps. Synchronous so `defer` can call it.
    func stop() {
        guard self.poll() == nil else { return }
        kill(self.pid, SIGTERM)
        for _ in 0..<200 {
            if self.poll() != nil { return }
            usleep(10_000)
        }
        kill(self.pid, SIGKILL)
        var status: CInt = 0
        while waitpid(self.pid, &status, 0) == -1 && errno == EINTR {}
        self.reaped = status
    }

    /// What the process wrote to stdout and stderr so far.
    var log: String { (try? readFile(self.logPath)).map { String(decoding: $0, as: UTF8.self) } ?? "" }

    deinit { self.stop() }
}

/// Runs a command to completion (bounded) and returns its exit status and output.
func run(_ arguments: [String], in directory: TemporaryDirectory, timeout: Duration = .seconds(60)) async throws -> (
    status: CInt, output: String
) {
    let log = directory.path("run-\(UInt32.random(in: 0 ... .max)).log")
    let process = try Subprocess(arguments, logPath: log)
    defer { process.stop() }
    guard let status = await process.wait(timeout: timeout) else {
        throw TestFailure(
            "\(arguments.joined(separator: " ")) did not finish within \(timeout); output: \(process.log)"
        )
    }
    let exit: CInt = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    return (exit, process.log)
}
