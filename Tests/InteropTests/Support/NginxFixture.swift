import AccessoryCrypto
import AccessoryTestSupport
import Glibc

/// A private nginx serving a temporary document root on a unix socket, run as the current
/// user in the foreground with every path it writes inside its own temporary prefix.
final class NginxFixture: Sendable {
    static let executable = "/usr/sbin/nginx"

    let directory: TemporaryDirectory
    let socketPath: String
    /// The loopback TCP port nginx also listens on, when asked for one.
    let tcpPort: UInt16?
    let documentRoot: String
    let process: Subprocess

    /// The static files served, by name (`/small.txt`, `/random.bin`, `/empty.txt`).
    static let smallText = "Hello from nginx, read by accessory-http.\n"
    static let randomSize = 5 * 1024 * 1024

    /// A gzip-able text (`/text.txt`, served gzipped when asked) and a body sent at 10 kB/s
    /// (`/slow.bin`).
    static let text = String(repeating: "accessory-http differential line of text, gzip-able.\n", count: 4000)
    static let slowSize = 1024 * 1024

    private init(
        directory: TemporaryDirectory,
        socketPath: String,
        tcpPort: UInt16?,
        documentRoot: String,
        process: Subprocess
    ) {
        self.directory = directory
        self.socketPath = socketPath
        self.tcpPort = tcpPort
        self.documentRoot = documentRoot
        self.process = process
    }

    /// Starts nginx, runs `body`, and stops nginx and removes its directory however `body` ends.
    /// - Parameters:
    ///   - tcpPort: also listen on 127.0.0.1 at this port (for URLSession's own HTTP stack).
    ///   - stallUpstream: a unix socket that accepts and never answers: `/stall` is proxied to
    ///     it, so nginx takes the request and sends nothing back.
    ///   - requestsPerConnection: nginx's `keepalive_requests`: after that many requests on a
    ///     connection it closes it (HTTP/1.1) or sends GOAWAY (HTTP/2).
    static func with<T>(
        tcpPort: UInt16? = nil,
        stallUpstream: String? = nil,
        http2: Bool = false,
        requestsPerConnection: Int? = nil,
        _ body: (NginxFixture) async throws -> T
    ) async throws -> T {
        guard access(Self.executable, X_OK) == 0 else {
            throw TestFailure(
                "nginx is not installed at \(Self.executable); run scripts/bootstrap (CI installs nginx-light) to run the interoperability tests"
            )
        }
        let directory = try TemporaryDirectory("ngx")
        defer { directory.remove() }
        let fixture = try await Self.start(
            in: directory,
            tcpPort: tcpPort,
            stallUpstream: stallUpstream,
            http2: http2,
            requestsPerConnection: requestsPerConnection
        )
        defer { fixture.process.stop() }
        return try await body(fixture)
    }

    private static func start(
        in directory: TemporaryDirectory,
        tcpPort: UInt16?,
        stallUpstream: String?,
        http2: Bool,
        requestsPerConnection: Int?
    ) async throws -> NginxFixture {
        let root = try directory.makeDirectory("www")
        let temporary = try directory.makeDirectory("tmp")
        try writeFile("\(root)/small.txt", Array(Self.smallText.utf8))
        try writeFile("\(root)/random.bin", secureRandomBytes(Self.randomSize))
        try writeFile("\(root)/empty.txt", [])
        try writeFile("\(root)/text.txt", Array(Self.text.utf8))
        try writeFile("\(root)/slow.bin", secureRandomBytes(Self.slowSize))
        let tcpListen = tcpPort.map { "listen 127.0.0.1:\($0);" } ?? ""
        let requestLimit = requestsPerConnection.map { "keepalive_requests \($0);" } ?? ""
        let stall =
            stallUpstream.map {
                "location = /stall { proxy_pass http://unix:\($0):/; proxy_read_timeout 300s; }"
            } ?? ""
        let socket = directory.path("ngx.sock")
        let config = """
            daemon off;
            master_process off;
            pid \(directory.path("nginx.pid"));
            error_log stderr warn;
            events {}
            http {
                access_log off;
                client_body_temp_path \(temporary)/body;
                proxy_temp_path \(temporary)/proxy;
                fastcgi_temp_path \(temporary)/fastcgi;
                uwsgi_temp_path \(temporary)/uwsgi;
                scgi_temp_path \(temporary)/scgi;
                types { text/plain txt; application/octet-stream bin; }
                server {
                    listen unix:\(socket)\(http2 ? " http2" : "");
                    \(tcpListen)
                    \(requestLimit)
                    location / { root \(root); }
                    location = /text.txt { root \(root); gzip on; gzip_types text/plain; gzip_min_length 1; }
                    location = /slow.bin { root \(root); limit_rate 10k; }
                    \(stall)
                    location = /status {
                        default_type application/json;
                        return 200 '{"model":"nginx","ok":true}';
                    }
                    # Answered with `Connection: close`, then nginx closes the connection.
                    location = /last { keepalive_requests 1; default_type text/plain; return 200 'last'; }
                    # nginx closes the connection after it has been idle for 1 s.
                    location = /brief { keepalive_timeout 1s; default_type text/plain; return 200 'brief'; }
                }
            }

            """
        let configPath = directory.path("nginx.conf")
        try writeFile(configPath, Array(config.utf8))
        let process = try Subprocess(
            [Self.executable, "-p", directory.root, "-c", configPath, "-e", "stderr"],
            logPath: directory.path("nginx.log")
        )
        let up = await waitUntil(timeout: .seconds(10)) { !process.isRunning || unixSocketAccepts(socket) }
        guard up, process.isRunning else {
            process.stop()
            throw TestFailure("nginx did not start accepting on \(socket) within 10 s; its output: \(process.log)")
        }
        return NginxFixture(
            directory: directory,
            socketPath: socket,
            tcpPort: tcpPort,
            documentRoot: root,
            process: process
        )
    }

    func fileBytes(_ name: String) throws -> [UInt8] { try readFile("\(self.documentRoot)/\(name)") }
}
