import AccessoryCrypto
import Glibc

/// A private nginx serving a temporary document root on a unix socket, run as the current
/// user in the foreground with every path it writes inside its own temporary prefix.
final class NginxFixture: Sendable {
    static let executable = "/usr/sbin/nginx"

    let directory: TemporaryDirectory
    let socketPath: String
    let documentRoot: String
    let process: Subprocess

    /// The static files served, by name (`/small.txt`, `/random.bin`, `/empty.txt`).
    static let smallText = "Hello from nginx, read by accessory-http.\n"
    static let randomSize = 5 * 1024 * 1024

    private init(directory: TemporaryDirectory, socketPath: String, documentRoot: String, process: Subprocess) {
        self.directory = directory
        self.socketPath = socketPath
        self.documentRoot = documentRoot
        self.process = process
    }

    /// Starts nginx, runs `body`, and stops nginx and removes its directory however `body` ends.
    static func with<T>(_ body: (NginxFixture) async throws -> T) async throws -> T {
        guard access(Self.executable, X_OK) == 0 else {
            throw TestFailure(
                "nginx is not installed at \(Self.executable); run scripts/bootstrap (CI installs nginx-light) to run the interoperability tests"
            )
        }
        let directory = try TemporaryDirectory("ngx")
        defer { directory.remove() }
        let fixture = try await Self.start(in: directory)
        defer { fixture.process.stop() }
        return try await body(fixture)
    }

    private static func start(in directory: TemporaryDirectory) async throws -> NginxFixture {
        let root = try directory.makeDirectory("www")
        let temporary = try directory.makeDirectory("tmp")
        try writeFile("\(root)/small.txt", Array(Self.smallText.utf8))
        try writeFile("\(root)/random.bin", secureRandomBytes(Self.randomSize))
        try writeFile("\(root)/empty.txt", [])
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
                    listen unix:\(socket);
                    location / { root \(root); }
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
        return NginxFixture(directory: directory, socketPath: socket, documentRoot: root, process: process)
    }

    func fileBytes(_ name: String) throws -> [UInt8] { try readFile("\(self.documentRoot)/\(name)") }
}
