import AccessoryEmulator
import Glibc

/// curl and h2load against nginx serving the same bytes on a unix socket: what an ordinary
/// HTTP stack achieves on the same machine in the same run.
extension Benchmarks {
    func peers(_ exchange: StatusExchange, into table: inout Table) async throws {
        guard let nginx = Sys.which("nginx") else {
            table.unavailable(Names.curlBulk, "MiB/s", "nginx not installed (scripts/bench installs nginx-light)")
            table.unavailable(Names.h2loadStatus, "req/s", "nginx not installed")
            return
        }
        let root = "\(self.workDir)/nginx"
        let socket = "\(root)/nginx.sock"
        for directory in [root, "\(root)/www", "\(root)/www/bytes", "\(root)/tmp", "\(root)/logs"] {
            mkdir(directory, 0o755)
        }
        unlink(socket)
        try self.writePatternFile("\(root)/www/bytes/\(self.bulkBytes)", count: self.bulkBytes)
        try exchange.responseBody.withUnsafeBytes { try Sys.writeFile("\(root)/www/status", $0) }
        let config = """
            worker_processes 1;
            daemon off;
            master_process off;
            error_log \(root)/logs/error.log;
            pid \(root)/nginx.pid;
            events { worker_connections 64; }
            http {
                access_log off;
                sendfile on;
                keepalive_requests 100000000;
                keepalive_timeout 120s;
                client_body_temp_path \(root)/tmp/body;
                proxy_temp_path \(root)/tmp/proxy;
                fastcgi_temp_path \(root)/tmp/fastcgi;
                uwsgi_temp_path \(root)/tmp/uwsgi;
                scgi_temp_path \(root)/tmp/scgi;
                default_type application/octet-stream;
                server {
                    listen unix:\(socket);
                    root \(root)/www;
                    location = /status { default_type application/json; }
                }
            }
            """
        try Array(config.utf8).withUnsafeBytes { try Sys.writeFile("\(root)/nginx.conf", $0) }
        let null = try Sys.devNull()
        defer { close(null) }
        let log = try self.childStderr()
        defer { close(log) }
        let server = try Sys.spawn(
            [nginx, "-p", "\(root)/", "-c", "\(root)/nginx.conf"],
            stdin: null,
            stdout: log,
            stderr: log
        )
        defer { Sys.terminate(server) }
        var info = stat()
        for _ in 0..<500 where stat(socket, &info) != 0 { try await Task.sleep(for: .milliseconds(10)) }
        guard stat(socket, &info) == 0 else {
            throw BenchError("nginx did not create \(socket); see \(root)/logs/error.log")
        }

        if let curl = Sys.which("curl") {
            let rates = try self.curlBulkRates(curl, socket: socket, null: null, log: log, server: "nginx")
            table.add(Names.curlBulk, "MiB/s", rates, note: "curl -o /dev/null, process start included; nginx sendfile")
        } else {
            table.unavailable(Names.curlBulk, "MiB/s", "curl not installed")
        }

        if let h2load = Sys.which("h2load") {
            var rates: [Double] = [], means: [Double] = [], clientCPU: [Double] = [], serverCPU: [Double] = []
            let output = "\(self.workDir)/h2load.out"
            for rep in 0..<(self.reps + 1) {
                let out = try Sys.createFile(output)
                let serverBefore = Sys.cpuSeconds(server)
                let pid = try Sys.spawn(
                    [
                        h2load, "--h1", "-c", "1", "-t", "1", "-n", String(self.statusCount), "-B", "unix:\(socket)",
                        "http://accessory/status",
                    ],
                    stdin: null,
                    stdout: out,
                    stderr: log
                )
                close(out)
                let exit = Sys.wait(pid)
                let serverSeconds = Sys.cpuSeconds(server) - serverBefore
                guard exit.succeeded else { throw BenchError("h2load failed; see \(output)") }
                let text = Sys.readFile(output)
                guard let parsed = Self.parseH2load(text) else {
                    throw BenchError("cannot read h2load's output: \(text)")
                }
                if rep > 0 {
                    rates.append(parsed.rate)
                    means.append(parsed.meanMicroseconds)
                    clientCPU.append(exit.cpuSeconds * 1e6 / Double(self.statusCount))
                    serverCPU.append(serverSeconds * 1e6 / Double(self.statusCount))
                }
            }
            table.add(Names.h2loadStatus, "req/s", rates, note: "one connection, \(self.statusCount) requests")
            table.add(Names.h2loadStatusMean, "µs", means, note: "h2load reports the mean, not percentiles")
            table.add(
                Names.h2loadClientCPU,
                "µs",
                clientCPU,
                note: "CPU time of h2load per request (start-up included)"
            )
            table.add(Names.h2loadServerCPU, "µs", serverCPU, note: "CPU time of nginx per request")
        } else {
            table.unavailable(Names.h2loadStatus, "req/s", "h2load not installed (Debian package nghttp2-client)")
        }
    }

    /// MiB/s of `curl -o /dev/null` fetching `/bytes/N` over the unix socket, one value per
    /// repetition after a first that warms up.
    func curlBulkRates(_ curl: String, socket: String, null: CInt, log: CInt, server: String) throws -> [Double] {
        var rates: [Double] = []
        for rep in 0..<(self.reps + 1) {
            let start = Sys.now()
            let pid = try Sys.spawn(
                [
                    curl, "-s", "-f", "--unix-socket", socket, "-o", "/dev/null",
                    "http://accessory/bytes/\(self.bulkBytes)",
                ],
                stdin: null,
                stdout: log,
                stderr: log
            )
            guard Sys.wait(pid).succeeded else {
                throw BenchError("curl against \(server) failed; see \(self.childLog)")
            }
            if rep > 0 { rates.append(Self.mibPerSecond(self.bulkBytes, Sys.now() - start)) }
        }
        return rates
    }

    /// The emulator's pattern, so nginx serves the very bytes `/bytes/N` produces.
    func writePatternFile(_ path: String, count: Int) throws {
        var info = stat()
        if stat(path, &info) == 0 && Int(info.st_size) == count { return }
        let fd = try Sys.createFile(path)
        defer { close(fd) }
        var offset = 0
        while offset < count {
            let size = min(RawLimits.blockSize, count - offset)
            try Sys.writeAll(fd, EmulatedAccessory.patternBytes(offset: offset, count: size))
            offset += size
        }
    }

    /// "finished in 1.23s, 4056.78 req/s, …" and "time for request: MIN MAX MEAN SD …".
    static func parseH2load(_ text: String) -> (rate: Double, meanMicroseconds: Double)? {
        var rate: Double?
        var mean: Double?
        for line in text.split(separator: "\n") {
            if line.hasPrefix("finished in") {
                let parts = line.split(separator: ",")
                if parts.count > 1, let value = Double(parts[1].split(separator: " ").first ?? "") { rate = value }
            }
            if line.hasPrefix("time for request:") {
                let fields = line.dropFirst("time for request:".count).split(separator: " ")
                if fields.count >= 3 { mean = Self.microseconds(fields[2]) }
            }
        }
        guard let rate, let mean else { return nil }
        return (rate, mean)
    }

    static func microseconds(_ text: Substring) -> Double? {
        for (suffix, scale) in [("us", 1.0), ("ms", 1e3), ("s", 1e6)] where text.hasSuffix(suffix) {
            return Double(text.dropLast(suffix.count)).map { $0 * scale }
        }
        return nil
    }
}
