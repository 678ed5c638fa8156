import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `serve` on a unix socket, a child's stdio and a serial line (socat ptys), with the CLI and
/// curl as clients.
@Suite("serve")
struct ServeTests {
    let scratch: Scratch

    init() throws {
        self.scratch = try Scratch()
    }

    /// Sends SIGTERM and waits (bounded) for the server to exit.
    func stop(_ server: Child, sourceLocation: SourceLocation = #_sourceLocation) async -> RunResult {
        server.signal(SIGTERM)
        let result = await server.finish(timeout: 5)
        #expect(!result.timedOut, "the server did not stop on SIGTERM: \(result)", sourceLocation: sourceLocation)
        #expect(
            !result.signaled && (result.status == 0 || result.status == 130),
            "\(result)",
            sourceLocation: sourceLocation
        )
        return result
    }

    @Test func serveOnAUnixSocket() async throws {
        let socket = scratch.file("acc.sock")
        let server = try startCLI(["serve", "--device", "unix:" + socket], scratch: scratch)
        let listening = await eventually { FileManager.default.fileExists(atPath: socket) || !server.isRunning }
        guard listening, server.isRunning else {
            let result = await server.finish(timeout: 2)
            Issue.record("the server did not start listening: \(result)")
            return
        }

        let cli = try await runCLI(["--device", "unix:" + socket, "get", "/status"], scratch: scratch)
        #expect(cli.status == 0, "\(cli)")
        #expect(cli.json?["model"] is String, "\(cli)")

        let count = 1_000_000
        let path = scratch.file("unix.bin")
        let download = try await runCLI(
            ["--device", "unix:" + socket, "download", "/bytes/\(count)", "-o", path],
            scratch: scratch
        )
        #expect(download.status == 0, "\(download)")
        #expect(readFile(path).map(sha256) == Pattern.sha256(count: count))

        if let curl = which("curl") {
            let result = try await run(
                curl,
                ["-sS", "--max-time", "10", "--unix-socket", socket, "http://x/status"],
                scratch: scratch
            )
            #expect(result.status == 0, "\(result)")
            #expect(result.json?["model"] is String, "\(result)")

            let upload = try await run(
                curl,
                ["-sS", "--max-time", "10", "--unix-socket", socket, "--data-binary", "hello", "http://x/upload"],
                scratch: scratch
            )
            #expect(upload.json?["length"] as? Int == 5, "\(upload)")
            #expect(upload.json?["sha256"] as? String == sha256(Array("hello".utf8)), "\(upload)")
        } else {
            Issue.record("curl is not installed")
        }

        _ = await stop(server)
    }

    @Test func serveRefusesTheEmulator() async throws {
        let result = try await runCLI(["serve", "--device", "emulator"], scratch: scratch)
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains("unix:PATH"), "\(result)")
    }

    @Test func httpOverAChildsStdio() async throws {
        let binary = try CLIBinary.url().path
        let device = "exec:'\(binary)' serve --device stdio"
        let result = try await runCLI(["--device", device, "get", "/status"], scratch: scratch, timeout: 15)
        #expect(result.status == 0, "\(result)")
        #expect(result.json?["model"] is String, "\(result)")

        let upload = try await runCLI(
            ["--device", device, "post", "/upload", "-d", "over a pipe"],
            scratch: scratch,
            timeout: 15
        )
        #expect(upload.status == 0, "\(upload)")
        #expect(upload.json?["length"] as? Int == 11, "\(upload)")
    }

    /// `serve --max-request-body`: an upload over the limit gets 413 (exit 22 with --fail), one
    /// within it is served; nonsense limits are refused as usage errors.
    @Test func serveLimitsTheRequestBody() async throws {
        let binary = try CLIBinary.url().path
        let device = "exec:'\(binary)' serve --device stdio --max-request-body 11 --idle-timeout 5"
        let fits = try await runCLI(
            ["--device", device, "post", "/upload", "-d", "over a pipe"],
            scratch: scratch,
            timeout: 15
        )
        #expect(fits.status == 0 && fits.json?["length"] as? Int == 11, "\(fits)")
        let over = try await runCLI(
            ["--device", device, "post", "--fail", "/upload", "-d", "over a pipe!"],
            scratch: scratch,
            timeout: 15
        )
        #expect(over.status == 22 && over.stderr.contains("413"), "\(over)")
        for bad in [["--max-request-body", "-1"], ["--idle-timeout", "0"]] {
            let refused = try await runCLI(["serve", "--device", "stdio"] + bad, scratch: scratch)
            #expect(refused.status == 64, "\(bad): \(refused)")
        }
    }

    // Each CLI run below has its own timeout; the limit also covers the wait for a turn at
    // Gate.cli, which a sanitized run of the whole target stretched past one minute.
    @Test(.timeLimit(.minutes(3)))
    func serveOnASerialLineThroughSocatPtys() async throws {
        guard let socat = which("socat") else {
            Issue.record("socat is not installed")
            return
        }
        let host = scratch.file("tty-host")
        let device = scratch.file("tty-dev")
        let pair = try Child(
            executable: socat,
            arguments: ["PTY,link=\(host),raw,echo=0", "PTY,link=\(device),raw,echo=0"],
            environment: scratch.environment(),
            stdin: nil
        )
        defer { pair.signal(SIGKILL) }
        let linked = await eventually {
            FileManager.default.fileExists(atPath: host) && FileManager.default.fileExists(atPath: device)
        }
        try #require(linked, "socat made no ptys: \(pair.stderrSoFar)")

        let server = try startCLI(["serve", "--device", "serial:" + device], scratch: scratch)
        // The server has the line once it holds the lock; give it a moment, then check it lives.
        try await Task.sleep(for: .milliseconds(300))
        guard server.isRunning else {
            Issue.record("serve on a pty exited: \(await server.finish(timeout: 1))")
            return
        }

        let status = try await runCLI(["--device", "serial:" + host, "get", "/status"], scratch: scratch, timeout: 15)
        #expect(status.status == 0, "\(status)")
        #expect(status.json?["model"] is String, "\(status)")

        let count = 1 << 20
        let path = scratch.file("serial.bin")
        let download = try await runCLI(
            ["--device", "serial:" + host, "download", "/bytes/\(count)", "-o", path],
            scratch: scratch,
            timeout: 20
        )
        #expect(download.status == 0, "\(download)")
        let bytes = readFile(path) ?? []
        #expect(bytes.count == count, "\(download)")
        #expect(sha256(bytes) == Pattern.sha256(count: count))

        // A second server on the same line is refused while the first holds it.
        let second = try await runCLI(["serve", "--device", "serial:" + device], scratch: scratch, timeout: 10)
        #expect(second.status == 69, "\(second)")
        #expect(second.stderr.contains("in use") || second.stderr.contains("busy"), "\(second)")
        #expect(second.stderr.contains(device), "\(second)")

        #expect(server.isRunning, "the first server is unaffected")
        _ = await stop(server)
    }

    /// Starts `serve --device unix:SOCKET EXTRA`, waits until it answers a request (its socket
    /// mode and group are set by then), and returns the socket's stat, stopping the server.
    func socketStat(_ extra: [String], name: String) async throws -> stat? {
        let socket = scratch.file(name)
        let server = try startCLI(["serve", "--device", "unix:" + socket] + extra, scratch: scratch)
        let listening = await eventually { FileManager.default.fileExists(atPath: socket) || !server.isRunning }
        guard listening, server.isRunning else {
            Issue.record("the server did not start listening: \(await server.finish(timeout: 2))")
            return nil
        }
        let cli = try await runCLI(["--device", "unix:" + socket, "get", "/status"], scratch: scratch)
        #expect(cli.status == 0, "\(cli)")
        var info = stat()
        let found = stat(socket, &info) == 0
        _ = await stop(server)
        #expect(found, "no socket at \(socket)")
        #expect(found && (info.st_mode & S_IFMT) == S_IFSOCK)
        return found ? info : nil
    }

    /// Connecting to a unix socket needs write permission: by default owner and group only,
    /// whatever the umask.
    @Test func theSocketIs0660ByDefault() async throws {
        let info = try await self.socketStat([], name: "default.sock")
        #expect(info.map { String($0.st_mode & 0o7777, radix: 8) } == "660")
    }

    @Test func socketModeSetsTheMode() async throws {
        let owner = try await self.socketStat(["--socket-mode", "0600"], name: "owner.sock")
        #expect(owner.map { String($0.st_mode & 0o7777, radix: 8) } == "600")
        let everyone = try await self.socketStat(["--socket-mode", "666"], name: "everyone.sock")
        #expect(everyone.map { String($0.st_mode & 0o7777, radix: 8) } == "666")
    }

    @Test func socketGroupSetsTheGroup() async throws {
        // As root, a group that is surely not ours already (nogroup); otherwise our own group.
        var gid = getgid()
        if geteuid() == 0, let entry = getgrnam("nogroup") { gid = entry.pointee.gr_gid }
        let numeric = try await self.socketStat(["--socket-group", "\(gid)"], name: "gid.sock")
        #expect(numeric?.st_gid == gid)
        #expect(numeric.map { String($0.st_mode & 0o7777, radix: 8) } == "660")
        if let entry = getgrgid(gid), let name = entry.pointee.gr_name {
            let named = try await self.socketStat(["--socket-group", String(cString: name)], name: "name.sock")
            #expect(named?.st_gid == gid)
        }
    }

    @Test(arguments: [
        ["--socket-mode", "999"], ["--socket-mode", "1777"], ["--socket-mode", "rw-rw----"], ["--socket-mode", ""],
        ["--socket-group", "no-such-group-here"],
    ])
    func aBadSocketModeOrGroupIsAUsageError(option: [String]) async throws {
        let socket = scratch.file("bad.sock")
        let result = try await runCLI(["serve", "--device", "unix:" + socket] + option, scratch: scratch, timeout: 10)
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains(option[0]), "\(result)")
        #expect(!FileManager.default.fileExists(atPath: socket))
    }

    @Test func socketOptionsNeedAUnixSocket() async throws {
        let result = try await runCLI(
            ["serve", "--device", "stdio", "--socket-mode", "0600"],
            scratch: scratch,
            stdin: [],
            timeout: 10
        )
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains("unix:PATH"), "\(result)")
    }

    @Test func aSerialPathThatIsNotATtyIsRefused() async throws {
        let path = scratch.file("plain-file")
        try Data("x".utf8).write(to: URL(fileURLWithPath: path))
        let result = try await runCLI(["--device", "serial:" + path, "get", "/status"], scratch: scratch)
        #expect(result.status == 69, "\(result)")
        #expect(result.stderr.contains("not a serial tty"), "\(result)")
    }
}

/// What an `exec:` device leaves behind when the CLI exits.
@Suite("exec device lifetime")
struct ExecLifetimeTests {
    let scratch: Scratch

    init() throws {
        self.scratch = try Scratch()
    }

    /// Pids of processes whose command line contains `marker`.
    static func processes(containing marker: String) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> Int32? in
            guard let pid = Int32(entry), let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline")
            else { return nil }
            let text = String(decoding: data.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self)
            return text.contains(marker) ? pid : nil
        }
    }

    @Test func aChildThatIgnoresEOFIsNotLeftRunning() async throws {
        // A unique duration marks the child: `sleep 29.NNNNNNNN`.
        let marker = "29." + String(UInt32.random(in: 10_000_000...99_999_999))
        let result = try await runCLI(
            ["--device", "exec:exec sleep \(marker)", "get", "--timeout", "0.5", "/status"],
            scratch: scratch
        )
        #expect(result.status == 75, "\(result)")
        let gone = await eventually(timeout: 3) { Self.processes(containing: marker).isEmpty }
        // Clean up after ourselves whatever the outcome: these are the test's own processes.
        for pid in Self.processes(containing: marker) { kill(pid, SIGKILL) }
        #expect(gone, "the exec: child outlived the CLI")
    }
}
