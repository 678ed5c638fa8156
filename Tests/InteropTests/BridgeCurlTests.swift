import AccessoryBridge
import AccessoryCrypto
import AccessoryEmulator
import AccessoryTestSupport
import AccessoryTransport
import Glibc
import Testing

/// curl, a client nobody on the project wrote, through the bridge (issue 11): over the unix
/// socket and over TCP, keep-alive, HEAD, a 1 GiB download and a 100 MiB upload checked by
/// SHA-256 both ways, `Expect: 100-continue`, and the requests a gateway must refuse.
@Suite("curl through the bridge")
struct BridgeCurlTests {
    static let curl = "/usr/bin/curl"

    private func curl(_ arguments: [String], _ fixture: BridgeFixture) async throws -> (status: CInt, output: String) {
        try #require(access(Self.curl, X_OK) == 0, "curl is not installed at \(Self.curl); run scripts/bootstrap")
        return try await run(
            [Self.curl, "-sS", "--max-time", "120"] + arguments,
            in: fixture.directory,
            timeout: .seconds(150)
        )
    }

    @Test("GET and HEAD over the unix socket and TCP, two requests on one connection")
    func getHeadKeepAlive() async throws {
        try await withBridge { fixture in
            for via in [["--unix-socket", fixture.socket, "http://accessory"], [fixture.baseURL]] {
                let base = via.last ?? ""
                let options = Array(via.dropLast())
                let (status, output) = try await self.curl(
                    options + ["-v", "\(base)/status", "\(base)/echo?second=1"],
                    fixture
                )
                #expect(status == 0, "curl failed: \(output)")
                #expect(output.contains("\"serialNumber\":\"EMU0001\""), "no status body: \(output)")
                #expect(output.contains("\"path\":\"/echo?second=1\""), "no echo body: \(output)")
                #expect(
                    output.contains("Re-using existing connection"),
                    "the second request did not reuse the connection: \(output)"
                )
                // The accessory saw its own Host, not the client's.
                #expect(output.contains("\"host\":\"accessory\""), "Host was not rewritten: \(output)")

                let (headStatus, head) = try await self.curl(options + ["-I", "\(base)/bytes/1000"], fixture)
                #expect(headStatus == 0, "curl -I failed: \(head)")
                #expect(head.contains("HTTP/1.1 200"), "\(head)")
                #expect(head.lowercased().contains("content-length: 1000"), "HEAD lost the length: \(head)")
            }
        }
    }

    @Test("a Digest challenge (qop=auth, MD5 and SHA-256) passes through and curl --digest answers it")
    func digestChallengeAnsweredByTheClient() async throws {
        try await withBridge { fixture in
            for algorithm in ["MD5", "SHA-256"] {
                let url = "http://accessory/digest-auth/auth/user/secret/\(algorithm)"
                let (status, output) = try await self.curl(
                    ["--unix-socket", fixture.socket, "--digest", "-u", "user:secret", "-w", " %{http_code}", url],
                    fixture
                )
                #expect(status == 0, "curl failed: \(output)")
                #expect(
                    output.contains("\"authenticated\":true") && output.hasSuffix(" 200"),
                    "\(algorithm): \(output)"
                )
                let (_, wrong) = try await self.curl(
                    ["--unix-socket", fixture.socket, "--digest", "-u", "user:wrong", "-w", " %{http_code}", url],
                    fixture
                )
                #expect(wrong.hasSuffix(" 401"), "\(algorithm), a wrong password: \(wrong)")
            }
        }
    }

    @Test("a 1 GiB download (64 MiB under a sanitizer), checked by SHA-256")
    func largeDownload() async throws {
        // 1 GiB; 64 MiB under a sanitizer, whose pass checks memory, not scale (and whose
        // slowness would load the other suites' timing for minutes).
        let count = TimeBounds.sanitized ? 64 << 20 : 1 << 30
        try await withBridge { fixture in
            let output = fixture.directory.path("download.bin")
            let started = ContinuousClock.now
            let (status, log) = try await self.curl(
                [
                    "--unix-socket", fixture.socket, "-o", output, "-w", "%{http_code} %{size_download}",
                    "http://accessory/bytes/\(count)",
                ],
                fixture
            )
            let elapsed = ContinuousClock.now - started
            #expect(status == 0, "curl failed: \(log)")
            #expect(log.hasPrefix("200 \(count)"), "\(log)")
            let received = try fileSHA256(output)
            #expect(received == patternSHA256(count: count), "the body differs from the accessory's")
            print("bridge: \(count >> 20) MiB through curl over the unix socket in \(elapsed)")
        }
    }

    @Test("a 100 MiB upload (16 MiB under a sanitizer), with and without Expect: 100-continue, checked by SHA-256")
    func largeUpload() async throws {
        try await withBridge { fixture in
            let file = fixture.directory.path("upload.bin")
            let payload = secureRandomBytes(TimeBounds.sanitized ? 16 << 20 : 100 << 20)
            try writeFile(file, payload)
            let expected = sha256(payload)
            for header in ["Expect: 100-continue", "Expect:", "Transfer-Encoding: chunked"] {
                let (status, output) = try await self.curl(
                    [
                        "-v", "--expect100-timeout", "20", "-H", header, "--data-binary", "@\(file)",
                        fixture.baseURL + "/upload",
                    ],
                    fixture
                )
                #expect(status == 0, "curl failed with \(header): \(output)")
                #expect(
                    output.contains("\"sha256\":\"\(expected)\""),
                    "the accessory received other bytes (\(header)): \(output.suffix(400))"
                )
                if header.hasPrefix("Expect: 100") {
                    #expect(output.contains("HTTP/1.1 100 Continue"), "no 100 Continue came: \(output.prefix(2000))")
                }
            }
        }
    }

    @Test("absolute-form, CONNECT and a bad request are refused; the connection's next request is answered")
    func refusals() async throws {
        try await withBridge { fixture in
            let (status, output) = try await self.curl(
                [
                    "-v", "--unix-socket", fixture.socket, "--request-target", "http://elsewhere/status",
                    "http://accessory/",
                ],
                fixture
            )
            #expect(status == 0)
            #expect(output.contains("HTTP/1.1 400"), "absolute-form was not refused: \(output)")
            #expect(output.contains("not a proxy"), "\(output)")

            let connect = try await rawExchangeOffPool(
                fixture.socket,
                "CONNECT elsewhere:443 HTTP/1.1\r\nHost: elsewhere\r\n\r\n"
            )
            #expect(connect.hasPrefix("HTTP/1.1 405"), "CONNECT was not refused: \(connect)")

            let malformed = try await rawExchangeOffPool(
                fixture.socket,
                "GET /status HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
            )
            #expect(
                malformed.hasPrefix("HTTP/1.1 400"),
                "Content-Length with Transfer-Encoding was not refused: \(malformed)"
            )

            let (after, next) = try await self.curl(
                ["--unix-socket", fixture.socket, "http://accessory/status"],
                fixture
            )
            #expect(after == 0 && next.contains("EMU0001"), "the bridge did not answer after the refusals: \(next)")
            let statusDocument = try await self.curl(
                ["--unix-socket", fixture.socket, "http://accessory/.well-known/accessory-http/status"],
                fixture
            )
            #expect(
                statusDocument.output.contains("\"bad-request\":"),
                "refusals were not counted: \(statusDocument.output)"
            )
        }
    }
}

/// ``rawExchange(_:_:timeoutSeconds:)`` on a thread of its own (see ``offPool(_:)``).
func rawExchangeOffPool(_ path: String, _ request: String) async throws -> String {
    let result: Result<String, any Error> = await offPool {
        Result { try rawExchange(path, request) }
    }
    return try result.get()
}

/// Writes `request` to the unix socket at `path`, half-closes, and returns all it answers.
func rawExchange(_ path: String, _ request: String, timeoutSeconds: Int = 10) throws -> String {
    guard let fd = connectUnixSocket(path, timeoutSeconds: timeoutSeconds) else {
        throw TestFailure("cannot connect to \(path): errno \(errno)")
    }
    defer { close(fd) }
    let data = Array(request.utf8)
    guard write(fd, data, data.count) == data.count else { throw TestFailure("short write to \(path)") }
    shutdown(fd, Int32(SHUT_WR))
    return readToEnd(fd)
}

/// The SHA-256 of a file, read in 1 MiB pieces.
func fileSHA256(_ path: String) throws -> String {
    guard var digest = Digest(.sha256) else { throw TestFailure("no SHA-256") }
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { throw TestFailure("cannot open \(path)") }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 1 << 20)
    while true {
        let count = read(fd, &buffer, buffer.count)
        if count <= 0 { break }
        buffer.withUnsafeBytes { digest.update(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
    }
    return digest.finalize().hexString
}
