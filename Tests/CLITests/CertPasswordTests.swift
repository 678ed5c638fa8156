import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The PKCS#12 password from `--cert-password-file` and `$ACCESSORY_HTTP_CERT_PASSWORD`, so it
/// need not appear in the process list: a client identity against `serve --client-ca`.
@Suite("certificate password")
struct CertPasswordTests {
    let scratch: Scratch

    init() throws {
        self.scratch = try Scratch()
    }

    /// A CA for the server, a client CA and a client identity in `client.p12` (password `p12secret`).
    func makeCertificates() async throws {
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
            key clientca.key
            openssl req -x509 -new -key clientca.key -out clientca.pem -days 30 -subj "/CN=Test Client CA" 2>/dev/null
            key client.key
            openssl req -new -key client.key -out client.csr -subj "/CN=test-client" 2>/dev/null
            openssl x509 -req -in client.csr -CA clientca.pem -CAkey clientca.key -CAcreateserial -out client.pem -days 30 -extfile client.ext 2>/dev/null
            openssl pkcs12 -export -in client.pem -inkey client.key -out client.p12 -passout pass:p12secret
            """
        let result = try await run(URL(fileURLWithPath: "/bin/sh"), ["-c", script], scratch: scratch)
        try #require(result.status == 0, "openssl could not make the test certificates: \(result)")
    }

    func stop(_ server: Child) async {
        server.signal(SIGTERM)
        let result = await server.finish(timeout: 5)
        #expect(!result.timedOut, "the server did not stop on SIGTERM: \(result)")
    }

    @Test func aPKCS12PasswordFromAFileOrTheEnvironmentOpensTheIdentity() async throws {
        try await self.makeCertificates()
        let socket = scratch.file("mtls.sock")
        let server = try startCLI(
            [
                "serve", "--device", "unix:" + socket, "--cert", scratch.file("server.pem"), "--key",
                scratch.file("server.key"), "--client-ca", scratch.file("clientca.pem"),
            ],
            scratch: scratch
        )
        let listening = await eventually { FileManager.default.fileExists(atPath: socket) || !server.isRunning }
        guard listening, server.isRunning else {
            let result = await server.finish(timeout: 2)
            Issue.record("the server did not start listening: \(result)")
            return
        }
        let client = [
            "--device", "unix:" + socket, "--cacert", scratch.file("ca.pem"), "--tls-name", "accessory.local",
            "--cert", scratch.file("client.p12"),
        ]
        let good = scratch.file("good-password")
        try Data("p12secret\r\nthe second line is not part of it\n".utf8).write(to: URL(fileURLWithPath: good))
        let wrong = scratch.file("wrong-password")
        try Data("not-the-password\n".utf8).write(to: URL(fileURLWithPath: wrong))

        // Without a password the PKCS#12 file does not open: the file and the variable are what work.
        let none = try await runCLI(client + ["get", "/status"], scratch: scratch)
        #expect(none.status != 0, "\(none)")

        let fromFile = try await runCLI(client + ["--cert-password-file", good, "get", "/status"], scratch: scratch)
        #expect(fromFile.status == 0, "\(fromFile)")
        #expect(fromFile.json?["model"] is String, "\(fromFile)")

        let fromEnvironment = try await runCLI(
            client + ["get", "/status"],
            scratch: scratch,
            env: ["ACCESSORY_HTTP_CERT_PASSWORD": "p12secret"]
        )
        #expect(fromEnvironment.status == 0, "\(fromEnvironment)")
        #expect(fromEnvironment.json?["model"] is String, "\(fromEnvironment)")

        // The file comes before the environment.
        let fileFirst = try await runCLI(
            client + ["--cert-password-file", wrong, "get", "/status"],
            scratch: scratch,
            env: ["ACCESSORY_HTTP_CERT_PASSWORD": "p12secret"]
        )
        #expect(fileFirst.status != 0, "\(fileFirst)")
        #expect(fileFirst.stderr.contains("wrong password"), "\(fileFirst)")

        // A password file that cannot be read says so.
        let missing = try await runCLI(
            client + ["--cert-password-file", scratch.file("no-such-file"), "get", "/status"],
            scratch: scratch
        )
        #expect(missing.status == 74, "\(missing)")
        #expect(missing.stderr.contains("--cert-password-file"), "\(missing)")

        await self.stop(server)
    }

    @Test func bothPasswordOptionsAreAUsageError() async throws {
        let file = scratch.file("password")
        try Data("secret\n".utf8).write(to: URL(fileURLWithPath: file))
        let result = try await runCLI(
            [
                "--device", "unix:" + scratch.file("none.sock"), "--cert", "x.p12", "--cert-password", "a",
                "--cert-password-file", file, "get", "/status",
            ],
            scratch: scratch
        )
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains("not both"), "\(result)")
    }
}
