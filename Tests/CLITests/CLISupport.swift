import AccessoryCrypto
import AccessoryTestSupport
import AccessoryTransport
import Dispatch
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

// MARK: - Finding the binary

enum CLIBinary {
    /// The package root: this file is `<root>/Tests/CLITests/CLISupport.swift`.
    static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()
        .deletingLastPathComponent()
        .deletingLastPathComponent()

    /// `accessory-http` as built by `swift build --build-tests`, or `nil` with the places looked at.
    static let location: Result<URL, LookupError> = {
        var candidates: [URL] = []
        // Next to the test bundle (the build products folder of this very test run).
        if let bundle = Bundle.allBundles.first(where: { $0.bundlePath.hasSuffix(".xctest") }) {
            candidates.append(
                URL(fileURLWithPath: bundle.bundlePath).deletingLastPathComponent().appendingPathComponent(
                    "accessory-http"
                )
            )
        }
        candidates.append(
            URL(fileURLWithPath: CommandLine.arguments.first ?? "").deletingLastPathComponent().appendingPathComponent(
                "accessory-http"
            )
        )
        let build = packageRoot.appendingPathComponent(".build")
        for triple in ["", "x86_64-unknown-linux-gnu/", "aarch64-unknown-linux-gnu/"] {
            candidates.append(build.appendingPathComponent("\(triple)debug/accessory-http"))
        }
        for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate.path) {
            return .success(candidate.standardizedFileURL)
        }
        return .failure(LookupError(paths: candidates.map(\.path)))
    }()

    struct LookupError: Error, CustomStringConvertible {
        let paths: [String]
        var description: String {
            "the accessory-http binary was not found; run `swift build --build-tests` first. Looked at:\n  "
                + paths.joined(separator: "\n  ")
        }
    }

    static func url() throws -> URL {
        try location.get()
    }
}

// MARK: - Scratch directories

/// A private directory per test: HOME and XDG_CONFIG_HOME point into it so the user's
/// configuration never leaks into a test, and every path a test makes is unique.
final class Scratch: Sendable {
    let url: URL

    init() throws {
        // Short: unix socket paths are limited to 108 bytes.
        let name = "ahcli-" + String(UUID().uuidString.prefix(8)).lowercased()
        self.url = URL(fileURLWithPath: "/tmp").appendingPathComponent(name)
        try FileManager.default.createDirectory(at: self.url, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: self.configHome, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: self.url) }

    var path: String { self.url.path }
    var configHome: URL { self.url.appendingPathComponent("config") }
    var configFile: URL { self.configHome.appendingPathComponent("accessory-http/config") }

    func file(_ name: String) -> String { self.url.appendingPathComponent(name).path }

    func writeConfig(_ text: String) throws {
        try FileManager.default.createDirectory(
            at: self.configFile.deletingLastPathComponent(),
            withIntermediateDirectories: true
        )
        try Data(text.utf8).write(to: self.configFile)
    }

    /// The environment a child runs with: nothing inherited but PATH.
    func environment(_ extra: [String: String] = [:]) -> [String: String] {
        var environment = [
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin",
            "HOME": self.path,
            "XDG_CONFIG_HOME": self.configHome.path,
            "LANG": "C.UTF-8",
        ]
        // A sanitizer run (scripts/test --sanitize) configures the CLI processes too.
        for name in ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"] {
            if let value = ProcessInfo.processInfo.environment[name] { environment[name] = value }
        }
        environment.merge(extra) { $1 }
        return environment
    }
}

// MARK: - Running a child process

struct RunResult: CustomStringConvertible {
    var status: Int32
    var stdout: [UInt8]
    var stderr: String
    var elapsed: Duration
    var timedOut: Bool
    /// True if the child was killed by a signal rather than exiting.
    var signaled: Bool
    /// What the child's threads were doing when it ran past its limit (``HungProcessReport``).
    var hungState = ""

    var stdoutText: String { String(decoding: self.stdout, as: UTF8.self) }

    var json: [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(self.stdout))) as? [String: Any]
    }

    var description: String {
        "status \(self.status)\(self.signaled ? " (signal)" : "")\(self.timedOut ? " TIMED OUT" : ""), "
            + "\(self.elapsed), stdout \(self.stdout.count) bytes: \(String(self.stdoutText.prefix(300)).debugDescription)\n"
            + "stderr: \(String(self.stderr.prefix(2000)))"
            + (self.hungState.isEmpty ? "" : "\nits threads before it was killed:\n\(self.hungState)")
    }
}

/// Bytes collected from a pipe by a reader thread, readable at any time.
///
/// The reader is a thread of its own, not a Dispatch work item: tests run in parallel, every
/// child holds two blocked readers for its whole life, and on Linux libdispatch's global pool
/// only grows slowly past the core count, so readers queued behind blocked ones saw output
/// seconds late (a signal test then signalled a request that had already been answered).
private final class Collector: Sendable {
    private let bytes = TrackedMutex<[UInt8]>([])
    private let finished = Once()

    init(_ handle: FileHandle) {
        let fd = handle.fileDescriptor
        startThread { [self] in
            var chunk = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                self.bytes.withLock { $0.append(contentsOf: chunk[0..<count]) }
            }
            self.finished.fire(true)
        }
    }

    /// Waits (bounded) for the end of the pipe; a grandchild holding it open only costs the wait.
    func wait(for timeout: Double) async -> [UInt8] {
        _ = await self.finished.wait(timeout: timeout)
        return self.bytes.withLock { $0 }
    }

    var snapshot: [UInt8] { self.bytes.withLock { $0 } }
}

/// Runs `body` on a new detached thread (see `Collector` for why not Dispatch).
private func startThread(_ body: @escaping @Sendable () -> Void) {
    let thread = Thread { body() }
    thread.stackSize = 1 << 20
    thread.start()
}

/// Resumes an async waiter once, with the first value fired.
private final class Once: Sendable {
    private struct State {
        var result: Bool?
        var continuation: CheckedContinuation<Bool, Never>?
    }
    private let state = TrackedMutex(State())

    func wait() async -> Bool {
        await withCheckedContinuation { continuation in
            let early: Bool? = self.state.withLock { state in
                if let result = state.result { return result }
                state.continuation = continuation
                return nil
            }
            if let early { continuation.resume(returning: early) }
        }
    }

    /// The value fired, or `false` if none came within `timeout` seconds.
    func wait(timeout: Double) async -> Bool {
        let timer = Task {
            try? await Task.sleep(for: .milliseconds(Int(timeout * 1000)))
            self.fire(false)
        }
        defer { timer.cancel() }
        return await self.wait()
    }

    func fire(_ value: Bool) {
        let continuation: CheckedContinuation<Bool, Never>? = self.state.withLock { state in
            guard state.result == nil else { return nil }
            state.result = value
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(returning: value)
    }
}

/// Writing to a child that has already exited must not kill the test process.
private let ignoreSIGPIPE: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

/// A child process with its output collected; `finish` waits for it, bounded.
final class Child: @unchecked Sendable {
    let process: Process
    private let out: Collector
    private let err: Collector
    private let exited: Once
    let started = ContinuousClock.now

    init(executable: URL, arguments: [String], environment: [String: String], stdin: [UInt8]?, directory: URL? = nil)
        throws
    {
        ignoreSIGPIPE
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = environment
        if let directory { process.currentDirectoryURL = directory }
        let outPipe = Pipe()
        let errPipe = Pipe()
        process.standardOutput = outPipe
        process.standardError = errPipe
        var inPipe: Pipe?
        if stdin != nil {
            let pipe = Pipe()
            process.standardInput = pipe
            inPipe = pipe
        } else {
            process.standardInput = FileHandle.nullDevice
        }
        let exited = Once()
        self.exited = exited
        process.terminationHandler = { _ in exited.fire(true) }
        self.process = process
        try process.run()
        // The parent's copies of the write ends must go, or the readers never see EOF.
        try? outPipe.fileHandleForWriting.close()
        try? errPipe.fileHandleForWriting.close()
        self.out = Collector(outPipe.fileHandleForReading)
        self.err = Collector(errPipe.fileHandleForReading)
        if let inPipe, let stdin {
            try? inPipe.fileHandleForReading.close()
            let writer = inPipe.fileHandleForWriting
            startThread {
                stdin.withUnsafeBytes { buffer in
                    guard let base = buffer.baseAddress else { return }
                    var offset = 0
                    while offset < buffer.count {
                        let written = write(writer.fileDescriptor, base + offset, buffer.count - offset)
                        if written < 0 && errno == EINTR { continue }
                        if written <= 0 { break }
                        offset += written
                    }
                }
                try? writer.close()
            }
        }
    }

    var pid: Int32 { self.process.processIdentifier }
    var isRunning: Bool { self.process.isRunning }
    var stderrSoFar: String { String(decoding: self.err.snapshot, as: UTF8.self) }
    /// How many bytes the child has written to stdout so far.
    var stdoutCountSoFar: Int { self.out.snapshot.count }

    func signal(_ number: Int32) { _ = kill(self.pid, number) }

    /// Waits up to `timeout` seconds for the child to exit; past that, kills it and reports a timeout.
    func finish(timeout: Double) async -> RunResult {
        var exitedInTime = await self.exited.wait(timeout: timeout)
        var hungState = ""
        if !exitedInTime {
            hungState = HungProcessReport.describe(self.pid)
            // Timed out: kill it and give it a moment to be reaped.
            _ = kill(self.pid, SIGKILL)
            for _ in 0..<200 where self.process.isRunning { try? await Task.sleep(for: .milliseconds(10)) }
            exitedInTime = false
        }
        let elapsed = ContinuousClock.now - self.started
        let stdout = await self.out.wait(for: 2)
        let stderr = await self.err.wait(for: 2)
        let running = self.process.isRunning
        return RunResult(
            status: running ? -1 : self.process.terminationStatus,
            stdout: stdout,
            stderr: String(decoding: stderr, as: UTF8.self),
            elapsed: elapsed,
            timedOut: !exitedInTime,
            signaled: !running && self.process.terminationReason == .uncaughtSignal,
            hungState: hungState
        )
    }
}

/// Runs a program to completion, bounded by `timeout` seconds; a timeout fails the test.
func run(
    _ executable: URL,
    _ arguments: [String],
    scratch: Scratch,
    env: [String: String] = [:],
    stdin: [UInt8]? = nil,
    timeout: Double = 20,
    sourceLocation: SourceLocation = #_sourceLocation
) async throws -> RunResult {
    let child = try Child(
        executable: executable,
        arguments: arguments,
        environment: scratch.environment(env),
        stdin: stdin,
        directory: scratch.url
    )
    // A liveness bound, not one on behaviour (tests that time a run measure it themselves):
    // under a sanitizer a CLI that had printed its usage error once took over 10 s to exit.
    let limit = timeout * (TimeBounds.sanitized ? 3 : 1)
    let result = await child.finish(timeout: limit)
    if result.timedOut {
        Issue.record(
            "\(executable.lastPathComponent) \(arguments) did not finish within \(limit) s; killed it.\n\(result)",
            sourceLocation: sourceLocation
        )
    }
    return result
}

/// At most a few CLI runs at once: on a small shared machine, dozens of parallel children make
/// each one slow, and the tests that measure time (timeouts) would measure the queue instead.
actor Gate {
    static let cli = Gate(width: 4)

    private let width: Int
    private var busy = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(width: Int) { self.width = width }

    func enter() async {
        if busy < width {
            busy += 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    func leave() {
        if waiting.isEmpty {
            busy -= 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}

extension Gate {
    /// Runs `body` as one of the `width` runs at a time, leaving the gate however it ends.
    nonisolated func admitting<T>(_ body: () async throws -> T) async rethrows -> T {
        await self.enter()
        do {
            let value = try await body()
            await self.leave()
            return value
        } catch {
            await self.leave()
            throw error
        }
    }
}

/// Runs `accessory-http ARGS` to completion.
func runCLI(
    _ arguments: [String],
    scratch: Scratch,
    env: [String: String] = [:],
    stdin: [UInt8]? = nil,
    timeout: Double = 20,
    sourceLocation: SourceLocation = #_sourceLocation
) async throws -> RunResult {
    let binary = try CLIBinary.url()
    return try await Gate.cli.admitting {
        try await run(
            binary,
            arguments,
            scratch: scratch,
            env: env,
            stdin: stdin,
            timeout: timeout,
            sourceLocation: sourceLocation
        )
    }
}

/// Starts `accessory-http ARGS` in the background (stop it with `stop`).
func startCLI(_ arguments: [String], scratch: Scratch, env: [String: String] = [:]) throws -> Child {
    try Child(
        executable: try CLIBinary.url(),
        arguments: arguments,
        environment: scratch.environment(env),
        stdin: nil,
        directory: scratch.url
    )
}

/// Polls `condition` every 20 ms for up to `timeout` seconds. The default is a liveness wait
/// (a child starting up, a socket appearing), not a bound on behaviour: under a sanitizer, with
/// a dozen instrumented children starting at once on two cores, start-up alone took over 10 s.
func eventually(timeout: Double = TimeBounds.sanitized ? 40 : 10, _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return condition()
}

func which(_ name: String) -> URL? {
    for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
        let url = URL(fileURLWithPath: String(directory)).appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: url.path) { return url }
    }
    return nil
}

// MARK: - Expected bytes

enum Pattern {
    /// The body of the emulator's `/bytes/N`: byte `i` is
    /// `UInt8(truncatingIfNeeded: i &* 31 &+ (i >> 16) &* 101 &+ 7)` (see `EmulatedAccessory.patternByte`).
    static func bytes(count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBufferPointer { buffer in
            for index in 0..<count {
                buffer[index] = UInt8(truncatingIfNeeded: index &* 31 &+ (index >> 16) &* 101 &+ 7)
            }
        }
        return bytes
    }

    static func sha256(count: Int) -> String { Digest.hex(.sha256, of: bytes(count: count)) }
}

func sha256(_ bytes: [UInt8]) -> String {
    Digest.hex(.sha256, of: bytes)
}

func readFile(_ path: String) -> [UInt8]? {
    FileManager.default.contents(atPath: path).map { [UInt8]($0) }
}

/// A self-signed EC certificate for `name` (its CN and DNS subjectAltName) in the scratch
/// directory, `NAME.pem` and `NAME.key`, made with openssl; returns a client's TLS options that
/// trust it by CA and name, and `serve`'s options that present it.
func makeSelfSignedCertificate(named name: String, scratch: Scratch) async throws -> (
    client: [String], server: [String]
) {
    let script = """
        set -e
        openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out \(name).key 2>/dev/null
        openssl req -x509 -new -key \(name).key -out \(name).pem -days 30 -subj "/CN=\(name)" -addext subjectAltName=DNS:\(name) 2>/dev/null
        """
    let result = try await run(URL(fileURLWithPath: "/bin/sh"), ["-c", script], scratch: scratch)
    try #require(result.status == 0, "making the test certificate failed: \(result)")
    return (
        ["--cacert", scratch.file(name + ".pem"), "--tls-name", name],
        ["--cert", scratch.file(name + ".pem"), "--key", scratch.file(name + ".key")]
    )
}
