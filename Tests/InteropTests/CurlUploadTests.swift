import AccessoryCrypto
import AccessoryEmulator
import AccessoryResponder
import AccessoryTestSupport
import Glibc
import NIOPosix  // for an event loop group; see the report: Package.swift should list it
import Testing

/// curl (a client nobody on the project wrote) uploading to our responder. Plain curl requests
/// are covered in AccessoryResponderTests; these are the two upload framings curl does its own way.
@Suite("curl uploads to our responder")
struct CurlUploadTests {
    static let curl = "/usr/bin/curl"

    enum Upload: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// `Transfer-Encoding: chunked` with a file body.
        case chunked
        /// `Expect: 100-continue`: curl waits for `100 Continue` before it sends the body.
        case expectContinue

        var testDescription: String { self.rawValue }
    }

    @Test(arguments: Upload.allCases)
    func curlUpload(_ upload: Upload) async throws {
        try #require(access(Self.curl, X_OK) == 0, "curl is not installed at \(Self.curl); run scripts/bootstrap")
        let directory = try TemporaryDirectory("curl")
        defer { directory.remove() }
        let socket = directory.path("acc.sock")
        let payload = secureRandomBytes(3 * 1024 * 1024 + 17)
        let file = directory.path("payload.bin")
        try writeFile(file, payload)

        let responder = EmulatedAccessory().makeResponder()
        let server = Task {
            try await responder.serveUnixSocket(path: socket, group: MultiThreadedEventLoopGroup.singleton)
        }
        defer { server.cancel() }
        let listening = await waitUntil(timeout: .seconds(10)) { unixSocketAccepts(socket) }
        try #require(listening, "the responder did not listen on \(socket) within 10 s")

        let header =
            switch upload {
            case .chunked: "Transfer-Encoding: chunked"
            case .expectContinue: "Expect: 100-continue"
            }
        let output = directory.path("response.json")
        let (status, log) = try await run(
            [
                Self.curl, "-sS", "-v", "--fail-with-body", "--max-time", "30",
                // curl sends the body anyway after this long without `100 Continue`; make that
                // long enough that a missing `100 Continue` cannot pass unnoticed.
                "--expect100-timeout", "20",
                "--unix-socket", socket,
                "-H", header,
                "--data-binary", "@\(file)",
                "-o", output,
                "http://accessory/upload",
            ],
            in: directory
        )
        #expect(status == 0, "curl failed (\(status)): \(log)")
        let body = String(decoding: try readFile(output), as: UTF8.self)
        #expect(body.contains(#""length":\#(payload.count)"#), "\(body)")
        #expect(body.contains(#""sha256":"\#(sha256(payload))""#), "\(body)")

        // curl's trace shows the framing really was the one under test.
        switch upload {
        case .chunked:
            #expect(log.contains("> Transfer-Encoding: chunked"), "\(log)")
            #expect(!log.contains("> Content-Length"), "\(log)")
        case .expectContinue:
            #expect(log.contains("> Expect: 100-continue"), "\(log)")
            #expect(log.contains("< HTTP/1.1 100 Continue"), "the responder never answered 100 Continue: \(log)")
        }

        server.cancel()
        try await withTimeout(.seconds(10), "stopping the responder") { try await server.value }
    }
}
