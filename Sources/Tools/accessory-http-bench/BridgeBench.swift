import Glibc

/// The bridge (issue 11): `accessory-http bridge --device emulator` on a unix socket, with
/// ordinary clients through it. Compared in the report with curl + nginx on the same body and
/// with the native client's `/status`.
extension Benchmarks {
    func bridge(into table: inout Table) async throws {
        let socket = "\(self.workDir)/bridge.sock"
        unlink(socket)
        let null = try Sys.devNull()
        defer { close(null) }
        let log = try self.childStderr()
        defer { close(log) }
        let server = try Sys.spawn(
            [self.cli, "bridge", "--device", "emulator", "--listen", "unix:\(socket)"],
            stdin: null,
            stdout: log,
            stderr: log
        )
        defer { Sys.terminate(server) }
        var info = stat()
        for _ in 0..<500 where stat(socket, &info) != 0 { try await Task.sleep(for: .milliseconds(10)) }
        guard stat(socket, &info) == 0 else {
            throw BenchError("the bridge did not create \(socket); see \(self.childLog)")
        }

        if let curl = Sys.which("curl") {
            let rates = try self.curlBulkRates(curl, socket: socket, null: null, log: log, server: "the bridge")
            table.add(Names.bridgeCurlBulk, "MiB/s", rates, note: "curl -o /dev/null, process start included")
        } else {
            table.unavailable(Names.bridgeCurlBulk, "MiB/s", "curl not installed")
        }

        if let h2load = Sys.which("h2load") {
            for clients in [1, 8] {
                var rates: [Double] = []
                let output = "\(self.workDir)/h2load-bridge.out"
                for rep in 0..<(self.reps + 1) {
                    let out = try Sys.createFile(output)
                    let pid = try Sys.spawn(
                        [
                            h2load, "--h1", "-c", String(clients), "-t", "1", "-n", String(self.statusCount),
                            "-B", "unix:\(socket)", "http://accessory/status",
                        ],
                        stdin: null,
                        stdout: out,
                        stderr: log
                    )
                    close(out)
                    let exit = Sys.wait(pid)
                    let text = Sys.readFile(output)
                    guard exit.succeeded, let parsed = Self.parseH2load(text) else {
                        throw BenchError("h2load through the bridge failed: \(text)")
                    }
                    if rep > 0 { rates.append(parsed.rate) }
                }
                table.add(
                    clients == 1 ? Names.bridgeStatus1 : Names.bridgeStatus8,
                    "req/s",
                    rates,
                    note: "\(clients) connection(s), \(self.statusCount) requests; one exchange at a time on the link"
                )
            }
        } else {
            table.unavailable(Names.bridgeStatus1, "req/s", "h2load not installed (Debian package nghttp2-client)")
        }

        // 1000 idle client connections: what they cost the bridge process.
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < 1200 && limit.rlim_max >= 1200 {
            limit.rlim_cur = 1200
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        var growth: [Double] = []
        for rep in 0..<self.reps {
            // A fresh bridge each time: memory a bridge once took is not given back, so a
            // second round on the same process would measure nothing.
            let idleSocket = "\(self.workDir)/bridge-idle-\(rep).sock"
            unlink(idleSocket)
            let fresh = try Sys.spawn(
                [self.cli, "bridge", "--device", "emulator", "--listen", "unix:\(idleSocket)"],
                stdin: null,
                stdout: log,
                stderr: log
            )
            defer { Sys.terminate(fresh) }
            for _ in 0..<500 where stat(idleSocket, &info) != 0 { try await Task.sleep(for: .milliseconds(10)) }
            try await Task.sleep(for: .milliseconds(300))
            let before = Self.residentBytes(fresh)
            var idle: [CInt] = []
            for _ in 0..<1000 {
                guard let fd = Self.connectUnix(idleSocket) else { break }
                idle.append(fd)
            }
            try await Task.sleep(for: .seconds(1))
            let after = Self.residentBytes(fresh)
            for fd in idle { close(fd) }
            guard idle.count == 1000 else {
                throw BenchError("only \(idle.count) of 1000 connections to the bridge opened")
            }
            growth.append(Double(after - before) / 1024 / 1000)
        }
        table.add(
            Names.bridgeIdleMemory,
            "KiB",
            growth,
            note: "RSS growth of the bridge per idle client connection, 1000 open"
        )
    }

    static func residentBytes(_ pid: pid_t) -> Int {
        let text = Sys.readFile("/proc/\(pid)/status")
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let kib = line.dropFirst("VmRSS:".count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap {
                Int($0)
            }
            return (kib ?? 0) * 1024
        }
        return 0
    }

    static func connectUnix(_ path: String) -> CInt? {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            return nil
        }
        return fd
    }
}
