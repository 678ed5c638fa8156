import AccessoryClient
import AccessoryTransport
import Glibc
import HTTPTypes
import NIOCore
import Testing

/// Our client against nginx, an HTTP/1.1 server nobody on the project wrote, over three joins:
/// its unix socket directly, socat's stdio as a child process, and a pty that socat bridges.
@Suite("nginx as the accessory")
struct NginxInteropTests {
    enum Join: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// `unix:SOCK`
        case unixSocket
        /// `exec:socat - UNIX-CONNECT:SOCK`: HTTP over a child's stdin and stdout.
        case socatStdio
        /// `socat PTY,link=TTY,raw,echo=0 UNIX-CONNECT:SOCK` and our client on `serial:TTY`.
        case socatPty

        var testDescription: String { self.rawValue }
    }

    static let socat = "/usr/bin/socat"

    @Test(arguments: Join.allCases)
    func fetchesFromNginx(join: Join) async throws {
        try #require(access(Self.socat, X_OK) == 0, "socat is not installed at \(Self.socat); run scripts/bootstrap")
        try await NginxFixture.with { nginx in
            switch join {
            case .unixSocket:
                try await withClient("unix:\(nginx.socketPath)") { try await Self.exercise($0, nginx) }
            case .socatStdio:
                try await withClient("exec:\(Self.socat) - UNIX-CONNECT:\(nginx.socketPath)") {
                    try await Self.exercise($0, nginx)
                }
            case .socatPty:
                let tty = nginx.directory.path("tty")
                // No `fork`: one pty, one connection to nginx, kept for every request below.
                let bridge = try Subprocess(
                    [Self.socat, "PTY,link=\(tty),raw,echo=0", "UNIX-CONNECT:\(nginx.socketPath)"],
                    logPath: nginx.directory.path("socat.log")
                )
                defer { bridge.stop() }
                var info = stat()
                let ready = await waitUntil(timeout: .seconds(10)) { !bridge.isRunning || stat(tty, &info) == 0 }
                try #require(ready && bridge.isRunning, "socat did not create \(tty) within 10 s: \(bridge.log)")
                try await withClient("serial:\(tty)") { try await Self.exercise($0, nginx) }
                #expect(bridge.log.isEmpty, "socat complained: \(bridge.log)")
            }
        }
    }

    /// Everything asked of nginx on one client; the link must stay the one it opened first.
    static func exercise(_ client: AccessoryClient, _ nginx: NginxFixture) async throws {
        // JSON from a `return` directive.
        let (statusHead, statusBody) = try await client.get("/status")
        #expect(statusHead.status == .ok)
        #expect(statusHead.headerFields[.contentType] == "application/json")
        #expect(statusBody.text == #"{"model":"nginx","ok":true}"#)

        // A small static file.
        let (smallHead, smallBody) = try await client.get("/small.txt")
        #expect(smallHead.status == .ok)
        #expect(smallHead.headerFields[.contentType] == "text/plain")
        #expect(smallBody.text == NginxFixture.smallText)
        let etag = try #require(smallHead.headerFields[.eTag], "nginx sends an ETag for static files")

        // 5 MiB of random bytes, streamed and hashed, then downloaded to a file.
        let expected = sha256(try nginx.fileBytes("random.bin"))
        let big = try await client.hashedBody(AccessoryRequest(path: "/random.bin"))
        #expect(big.head.status == .ok)
        #expect(big.head.headerFields[.contentLength] == String(NginxFixture.randomSize))
        #expect(big.count == NginxFixture.randomSize)
        #expect(big.sha256 == expected)
        let downloaded = nginx.directory.path("downloaded.bin")
        let downloadHead = try await client.download(AccessoryRequest(path: "/random.bin"), to: downloaded)
        #expect(downloadHead.status == .ok)
        #expect(sha256(try readFile(downloaded)) == expected)

        // An empty file: Content-Length 0 and no body.
        let (emptyHead, emptyBody) = try await client.get("/empty.txt")
        #expect(emptyHead.status == .ok)
        #expect(emptyHead.headerFields[.contentLength] == "0")
        #expect(emptyBody.readableBytes == 0)

        // HEAD: the GET's headers, no body; the next response must still be read in step.
        let (headHead, headBody) = try await client.data(AccessoryRequest(method: .head, path: "/random.bin"))
        #expect(headHead.status == .ok)
        #expect(headHead.headerFields[.contentLength] == String(NginxFixture.randomSize))
        #expect(headHead.headerFields[.eTag] != nil)
        #expect(headHead.headerFields[.lastModified] != nil)
        #expect(headBody.readableBytes == 0)

        // 404 with nginx's HTML body.
        let (missingHead, missingBody) = try await client.get("/no-such-file")
        #expect(missingHead.status == .notFound)
        #expect(missingBody.text.contains("404 Not Found"))

        // 304 for a matching If-None-Match: no body even though nothing says its length.
        let (notModifiedHead, notModifiedBody) = try await client.get("/small.txt", headers: [.ifNoneMatch: etag])
        #expect(notModifiedHead.status == .notModified)
        #expect(notModifiedHead.headerFields[.eTag] == etag)
        #expect(notModifiedBody.readableBytes == 0)
        // …and a non-matching one still gets the file.
        let (changedHead, changedBody) = try await client.get("/small.txt", headers: [.ifNoneMatch: "\"other\""])
        #expect(changedHead.status == .ok)
        #expect(changedBody.text == NginxFixture.smallText)

        // A last request after all of that, then: every one rode the same link (keep-alive).
        let (finalHead, _) = try await client.get("/status")
        #expect(finalHead.status == .ok)
        #expect(client.link.openCount == 1)
    }

    /// nginx ends the connection itself: once after a response marked `Connection: close`, once
    /// when the link has been idle longer than its keep-alive timeout. The next request must
    /// open a new link instead of failing. (Not over the socat pty: when nginx closes, socat
    /// exits and the pty is gone, as a cable pulled out would be.)
    @Test(arguments: [Join.unixSocket, .socatStdio])
    func reopensWhenNginxCloses(join: Join) async throws {
        try #require(access(Self.socat, X_OK) == 0, "socat is not installed at \(Self.socat); run scripts/bootstrap")
        try await NginxFixture.with { nginx in
            let spec =
                join == .unixSocket
                ? "unix:\(nginx.socketPath)" : "exec:\(Self.socat) - UNIX-CONNECT:\(nginx.socketPath)"
            try await withClient(spec) { client in
                #expect(try await client.get("/status").0.status == .ok)

                let (lastHead, lastBody) = try await client.get("/last")
                #expect(lastHead.status == .ok)
                #expect(lastHead.headerFields[.connection] == "close")
                #expect(lastBody.text == "last")
                let (afterClose, _) = try await client.get("/status")
                #expect(afterClose.status == .ok)
                #expect(client.link.openCount == 2)

                let (briefHead, _) = try await client.get("/brief")
                #expect(briefHead.status == .ok)
                // nginx closes the idle connection after 1 s.
                try await Task.sleep(for: .milliseconds(2500))
                let (afterIdle, afterIdleBody) = try await client.get("/status")
                #expect(afterIdle.status == .ok)
                #expect(afterIdleBody.text == #"{"model":"nginx","ok":true}"#)
                #expect(client.link.openCount == 3)
            }
        }
    }
}
