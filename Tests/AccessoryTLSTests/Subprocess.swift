import AccessoryClient
import AccessoryHTTP1
import AccessoryTLS
import AccessoryTestSupport
import AccessoryTransport
import Foundation

/// Tests/Fixtures/make-forged-cert.py (shared with the CLI tests): writes forged.pem/.key,
/// a certificate whose names try to forge terminal output.
let forgedCertificateScript = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures/make-forged-cert.py").path

/// One GET / through `configuration` to an `openssl s_server` peer: the status and the body.
func fetch(_ server: OpenSSLServer, _ configuration: TLSConfiguration) async throws -> (Int, String) {
    var clientConfiguration = AccessoryClient.Configuration()
    clientConfiguration.link.openTimeout = .seconds(10)
    clientConfiguration.defaultTimeout = .seconds(10)
    let client = AccessoryClient(
        transport: TLSTransport(wrapping: UnixSocketTransport(path: server.socket), configuration: configuration),
        configuration: clientConfiguration
    )
    do {
        let (response, body) = try await client.data(AccessoryRequest(path: "/"))
        await client.shutdown()
        return (response.status.code, String(buffer: body))
    } catch {
        await client.shutdown()
        throw error
    }
}

/// Runs helper programs (openssl, curl) with bounded run times; a background process is
/// killed by `stop()`, which tests call in `defer`.
final class Subprocess: @unchecked Sendable {
    // @unchecked: `process` is only touched through Foundation's thread-safe Process API
    // (run/terminate/isRunning), and the captured output files are read after it exited.
    let process = Process()
    let outputURL: URL
    let errorURL: URL

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    init(_ arguments: [String], directory: String? = nil, stdin: String? = nil) throws {
        let temporary = FileManager.default.temporaryDirectory
        self.outputURL = temporary.appendingPathComponent("tls-out-\(UUID().uuidString)")
        self.errorURL = temporary.appendingPathComponent("tls-err-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: self.outputURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: self.errorURL.path, contents: nil)
        self.process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        self.process.arguments = arguments
        if let directory { self.process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        self.process.standardOutput = try FileHandle(forWritingTo: self.outputURL)
        self.process.standardError = try FileHandle(forWritingTo: self.errorURL)
        if let stdin {
            let pipe = Pipe()
            self.process.standardInput = pipe
            try self.process.run()
            pipe.fileHandleForWriting.write(Data(stdin.utf8))
            // Keep stdin open: s_client ends at EOF on stdin unless -ign_eof.
            self.stdinPipe = pipe
        } else {
            self.process.standardInput = FileHandle.nullDevice
            try self.process.run()
        }
    }

    private var stdinPipe: Pipe?

    /// Waits (bounded) for the process to exit; kills it when the limit passes.
    func wait(limit: Duration = .seconds(15)) async -> Result {
        let deadline = ContinuousClock.now + limit
        while self.process.isRunning && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        if self.process.isRunning {
            self.stop()
            while self.process.isRunning { try? await Task.sleep(for: .milliseconds(20)) }
        }
        return Result(
            status: self.process.terminationStatus,
            stdout: (try? String(contentsOf: self.outputURL, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOf: self.errorURL, encoding: .utf8)) ?? ""
        )
    }

    func closeStdin() { try? self.stdinPipe?.fileHandleForWriting.close() }

    var stderrText: String { (try? String(contentsOf: self.errorURL, encoding: .utf8)) ?? "" }

    /// Ends the process and waits (bounded) until it is reaped. SIGTERM first; SIGKILL after
    /// 10 ms, because a child can start with SIGTERM blocked (it inherits the signal mask of
    /// the spawning thread) and `terminate()` alone left every `s_server` running. The grace is
    /// short because this waits on the concurrency runtime's pool (tests call it in `defer`):
    /// 100 ms per `s_server`, several at once, held up other suites in the same process.
    func stop() {
        try? self.stdinPipe?.fileHandleForWriting.close()
        guard self.process.isRunning else { return }
        self.process.terminate()
        let pid = self.process.processIdentifier
        for step in 0..<300 where self.process.isRunning {
            if step == 1 { kill(pid, SIGKILL) }
            usleep(10_000)
        }
    }

    deinit {
        self.stop()
        try? FileManager.default.removeItem(at: self.outputURL)
        try? FileManager.default.removeItem(at: self.errorURL)
    }

    /// Runs to completion (bounded) and returns the output.
    static func run(_ arguments: [String], directory: String? = nil, limit: Duration = .seconds(15)) async throws
        -> Result
    {
        let process = try Subprocess(arguments, directory: directory)
        return await process.wait(limit: limit)
    }
}

/// Test certificates made with the openssl command line, once per test process.
struct Certificates: Sendable {
    let directory: String

    func path(_ name: String) -> String { self.directory + "/" + name }

    /// Made once, on a thread of its own: the shell and its twenty-odd openssl runs take a
    /// second or more, and waiting for them on the concurrency runtime's pool (two threads on a
    /// two-core machine, and every suite's first test asking at once) stalled unrelated tests
    /// in the same process for as long; the bridge's HTTP/2 /status bound saw 1.5 s.
    private static let making = Task { () throws -> Certificates in
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try Certificates.make() }) }
        }
    }

    static func get() async throws -> Certificates { try await Self.making.value }

    private static func make() throws -> Certificates {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "accessory-tls-\(UUID().uuidString)"
        ).path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        RemovedAtExit.add(directory)
        let script = """
            set -e
            key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
            printf 'subjectAltName=DNS:accessory.local\\nbasicConstraints=CA:FALSE\\n' > server.ext
            printf 'basicConstraints=CA:FALSE\\nextendedKeyUsage=clientAuth\\n' > client.ext
            key ca.key
            openssl req -x509 -new -key ca.key -out ca.pem -days 30 -subj "/CN=Test Accessory CA" 2>/dev/null
            key server.key
            openssl req -new -key server.key -out server.csr -subj "/CN=accessory.local" 2>/dev/null
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 30 -extfile server.ext 2>/dev/null
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out expired.pem -days -1 -extfile server.ext 2>/dev/null
            key self.key
            openssl req -x509 -new -key self.key -out self.pem -days 30 -subj "/CN=Self-signed Accessory" -addext subjectAltName=DNS:accessory.local 2>/dev/null
            key other.key
            openssl req -x509 -new -key other.key -out other.pem -days 30 -subj "/CN=Impostor Accessory" -addext subjectAltName=DNS:accessory.local 2>/dev/null
            key clientca.key
            openssl req -x509 -new -key clientca.key -out clientca.pem -days 30 -subj "/CN=Test Client CA" 2>/dev/null
            key client.key
            openssl req -new -key client.key -out client.csr -subj "/CN=test-client" 2>/dev/null
            openssl x509 -req -in client.csr -CA clientca.pem -CAkey clientca.key -CAcreateserial -out client.pem -days 30 -extfile client.ext 2>/dev/null
            openssl pkcs12 -export -in client.pem -inkey client.key -out client.p12 -passout pass:p12secret
            openssl x509 -in self.pem -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64 > self.spki
            # A two-level CA: ca.pem -> int.pem -> leafint.pem (accessory.local).
            printf 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n' > int.ext
            key int.key
            openssl req -new -key int.key -out int.csr -subj "/CN=Test Intermediate CA" 2>/dev/null
            openssl x509 -req -in int.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out int.pem -days 30 -extfile int.ext 2>/dev/null
            key leafint.key
            openssl req -new -key leafint.key -out leafint.csr -subj "/CN=accessory.local" 2>/dev/null
            openssl x509 -req -in leafint.csr -CA int.pem -CAkey int.key -CAcreateserial -out leafint.pem -days 30 -extfile server.ext 2>/dev/null
            cat int.pem ca.pem > int+ca.pem
            # A client identity in a legacy (RC2) PKCS#12, as older tools export it.
            openssl pkcs12 -export -legacy -in client.pem -inkey client.key -out legacy.p12 -passout pass:p12secret
            # A certificate whose names try to forge terminal output (newline, ESC).
            python3 "\(forgedCertificateScript)" FAKE
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CertificateError(
                message: "openssl failed to make the test certificates (status \(process.terminationStatus))"
            )
        }
        return Certificates(directory: directory)
    }

    struct CertificateError: Error { let message: String }
}

/// `openssl s_server` answering HTTP (`-www`) on a unix socket: the accessory.
struct OpenSSLServer {
    let socket: String
    let process: Subprocess

    static func start(_ options: [String], certificates: Certificates) async throws -> OpenSSLServer {
        let socket = FileManager.default.temporaryDirectory.appendingPathComponent(
            "s_server-\(UInt32.random(in: 0...UInt32.max)).sock"
        ).path
        let process = try Subprocess(
            ["openssl", "s_server", "-unix", socket, "-unlink", "-www", "-quiet"] + options,
            directory: certificates.directory
        )
        // The socket file appears at bind(), before listen(): wait until a connection is accepted.
        for _ in 0..<500 where !Self.isListening(socket) {
            if !process.process.isRunning { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        guard Self.isListening(socket) else {
            process.stop()
            throw Certificates.CertificateError(message: "s_server did not start: \(process.stderrText)")
        }
        return OpenSSLServer(socket: socket, process: process)
    }

    func stop() {
        self.process.stop()
        try? FileManager.default.removeItem(atPath: self.socket)
    }

    /// Whether something accepts connections on `path` (a probe connection, closed at once;
    /// s_server shrugs off the aborted handshake and keeps serving).
    static func isListening(_ path: String) -> Bool {
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { Glibc.close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return result == 0
    }
}

enum TLSErrors {
    /// The TLSError under client and link errors.
    static func find(in error: any Error) -> TLSError? {
        var current: (any Error)? = error
        while let error = current {
            switch error {
            case let tls as TLSError: return tls
            case let client as AccessoryClientError: current = client.underlying
            case let link as HTTPLinkError: current = link.underlying
            default: return nil
            }
        }
        return nil
    }
}
