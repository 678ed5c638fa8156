import AccessoryClient
import AccessoryCrypto
import AccessoryEmulator
import AccessoryHTTP1
import AccessoryTestSupport
import AccessoryTransport
import Foundation
import HTTPTypes
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// The native client against the emulated accessory, over real socketpairs.
@Suite("Client end to end")
struct ClientEndToEndTests {
    @Test("GET /status returns the accessory's identity")
    func status() async throws {
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        let (head, body) = try await client.data(AccessoryRequest(path: "/status"))
        #expect(head.status == .ok)
        #expect(head.headerFields[.contentType] == "application/json")
        let json = try jsonObject(body)
        #expect(json["model"] as? String == "AH-EMU-1")
        #expect(json["serialNumber"] as? String == "EMU0001")
        #expect(json["firmwareVersion"] as? String == "1.0.0")
        #expect(json["uptimeSeconds"] != nil)
    }

    @Test("get(_:) is the short form of data(GET …)")
    func getShortForm() async throws {
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        let (head, body) = try await client.get("/status")
        #expect(head.status == .ok)
        #expect(try jsonObject(body)["model"] as? String == "AH-EMU-1")
        let (viaURL, bytes) = try await client.get("accessory://emulator/bytes/10")
        #expect(viaURL.status == .ok)
        #expect(bytes.readableBytes == 10)
        await #expect(throws: AccessoryClientError.self) { _ = try await client.get("status") }
        await #expect(throws: AccessoryClientError.self) { _ = try await client.get("/bytes/100", maxBodySize: 10) }
    }

    @Test("the body types answer to the names of what they belong to")
    func nestedBodyNames() async throws {
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        let body: AccessoryRequest.Body = .stream(length: 5) { (writer: HTTPRequestBody.Writer) in
            try await writer.write(ByteBuffer(string: "hello"))
        }
        let echoed = try await client.execute(AccessoryRequest(method: .post, path: "/echo", body: body)) {
            (response: AccessoryResponse) in
            let responseBody: AccessoryResponse.Body = response.body
            return try await responseBody.collect(upTo: 4096)
        }
        #expect(try jsonObject(echoed)["body"] as? String == "hello")
    }

    @Test("one link carries many requests")
    func keepAlive() async throws {
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        for index in 0..<25 {
            let (_, body) = try await client.data(AccessoryRequest(path: "/echo?n=\(index)"))
            #expect(try jsonObject(body)["path"] as? String == "/echo?n=\(index)")
        }
        #expect(client.link.openCount == 1)
    }

    @Test("concurrent requests are queued on the link and each gets its own response")
    func concurrentRequests() async throws {
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<50 {
                group.addTask {
                    let (_, body) = try await client.data(AccessoryRequest(path: "/echo?n=\(index)"))
                    #expect(try jsonObject(body)["path"] as? String == "/echo?n=\(index)")
                }
            }
            try await group.waitForAll()
        }
        #expect(client.link.openCount == 1)
    }

    @Test("Content-Length and chunked bodies arrive intact", arguments: ["bytes", "stream"])
    func bodies(kind: String) async throws {
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        let count = 3 * 1024 * 1024 + 17
        let (head, body) = try await client.data(AccessoryRequest(path: "/\(kind)/\(count)"))
        #expect(head.status == .ok)
        #expect(body.readableBytes == count)
        #expect(sha256(body) == expectedPatternSHA256(count: count))
        if kind == "stream" { #expect(head.headerFields[.contentLength] == nil) }
    }

    @Test("HEAD gets headers and no body; the link stays in step")
    func head() async throws {
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        let (head, body) = try await client.data(AccessoryRequest(method: .head, path: "/bytes/1000"))
        #expect(head.headerFields[.contentLength] == "1000")
        #expect(body.readableBytes == 0)
        let (_, status) = try await client.data(AccessoryRequest(path: "/status"))
        #expect(try jsonObject(status)["model"] as? String == "AH-EMU-1")
        #expect(client.link.openCount == 1)
    }

    @Test("the Host header names the accessory and can be configured")
    func hostHeader() async throws {
        let client = makeEmulatorClient { $0.link.host = "printer-7" }
        defer { Task { await client.shutdown() } }
        let (_, body) = try await client.data(AccessoryRequest(path: "/echo"))
        let headers = try jsonObject(body)["headers"] as? [String: String]
        #expect(headers?["host"] == "printer-7")
    }

    @Test("ETag revalidation gets 304 without a body")
    func conditionalRequest() async throws {
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        let (first, _) = try await client.data(AccessoryRequest(path: "/etag"))
        let etag = try #require(first.headerFields[.eTag])
        let (second, body) = try await client.data(
            AccessoryRequest(path: "/etag", headerFields: [.ifNoneMatch: etag])
        )
        #expect(second.status == .notModified)
        #expect(body.readableBytes == 0)
        #expect(client.link.openCount == 1)
    }

    // MARK: Redirects

    @Test("redirects are followed to the final response")
    func redirects() async throws {
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        let result = try await client.execute(AccessoryRequest(path: "/redirect/3")) { response in
            (response.status, response.redirectCount, response.path, try await response.body.collect(upTo: 1 << 16))
        }
        #expect(result.0 == .ok)
        #expect(result.1 == 3)
        #expect(result.2 == "/status")
        #expect(try jsonObject(result.3)["model"] as? String == "AH-EMU-1")
    }

    @Test("past the redirect limit the client fails with a clear error")
    func redirectLimit() async throws {
        let client = makeEmulatorClient { $0.redirects = RedirectPolicy(maxRedirects: 2) }
        defer { Task { await client.shutdown() } }
        await #expect {
            _ = try await client.data(AccessoryRequest(path: "/redirect/5"))
        } throws: { error in
            (error as? AccessoryClientError)?.code == .redirectFailed
        }
        // The link is still usable.
        let (head, _) = try await client.data(AccessoryRequest(path: "/status"))
        #expect(head.status == .ok)
    }

    @Test("with redirects off, the 3xx itself is returned")
    func redirectsOff() async throws {
        let client = makeEmulatorClient { $0.redirects = .none }
        defer { Task { await client.shutdown() } }
        let (head, _) = try await client.data(AccessoryRequest(path: "/redirect/1"))
        #expect(head.status == .found)
        #expect(head.headerFields[.location] == "/status")
    }

    // MARK: Authentication

    @Test("Basic authentication from request credentials")
    func basicAuthentication() async throws {
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        let (head, body) = try await client.data(
            AccessoryRequest(
                path: "/basic-auth/admin/secret",
                credentials: Credentials(user: "admin", password: "secret")
            )
        )
        #expect(head.status == .ok)
        #expect(try jsonObject(body)["authenticated"] as? Bool == true)
    }

    @Test("wrong credentials return the 401 to the caller")
    func wrongCredentials() async throws {
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        let (head, _) = try await client.data(
            AccessoryRequest(
                path: "/basic-auth/admin/secret",
                credentials: Credentials(user: "admin", password: "nope")
            )
        )
        #expect(head.status == .unauthorized)
        let (next, _) = try await client.data(AccessoryRequest(path: "/status"))
        #expect(next.status == .ok)
    }

    @Test("Digest authentication, credentials from the URL", arguments: ["MD5", "SHA-256", "MD5-sess", "SHA-256-sess"])
    func digestAuthentication(algorithm: String) async throws {
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        let request = try AccessoryRequest(
            url: "accessory://user:p%40ss@emulator/digest-auth/auth/user/p@ss/\(algorithm)"
        )
        let (head, body) = try await client.data(request)
        #expect(head.status == .ok)
        #expect(try jsonObject(body)["user"] as? String == "user")
    }

    @Test("Digest without qop (RFC 2069) through a credential provider")
    func digestWithoutQOP() async throws {
        let asked = Atomic<Int>(0)
        let client = makeEmulatorClient { configuration in
            configuration.credentialProvider = ClosureCredentialProvider { challenge, _ in
                asked.add(1, ordering: .relaxed)
                #expect(challenge.scheme == "digest")
                return Credentials(user: "u", password: "pw")
            }
        }
        defer { Task { await client.shutdown() } }
        let (head, _) = try await client.data(AccessoryRequest(path: "/digest-auth/none/u/pw"))
        #expect(head.status == .ok)
        #expect(asked.load(ordering: .relaxed) == 1)
    }

    @Test("the caller's handler runs where the caller runs; a credential provider never on an event loop")
    func whereCallerCodeRuns() async throws {
        let providerCallsOnALoop = Atomic<Int>(0)
        let client = makeEmulatorClient { configuration in
            configuration.credentialProvider = ClosureCredentialProvider { _, _ in
                if MultiThreadedEventLoopGroup.currentEventLoop != nil {
                    providerCallsOnALoop.add(1, ordering: .relaxed)
                }
                return Credentials(user: "u", password: "pw")
            }
        }
        defer { Task { await client.shutdown() } }
        let status = AccessoryRequest(path: "/status")
        let handlerOnALoop = try await client.execute(status) { _ in
            MultiThreadedEventLoopGroup.currentEventLoop != nil
        }
        #expect(!handlerOnALoop)
        // data() runs on the link's event loop, but the provider it may ask is the caller's code.
        let (head, _) = try await client.data(AccessoryRequest(path: "/digest-auth/none/u/pw"))
        #expect(head.status == .ok)
        #expect(providerCallsOnALoop.load(ordering: .relaxed) == 0)
        // A caller that asks for the link's executor gets it, handler included.
        let onTheLinksLoop = try await withTaskExecutorPreference(client.taskExecutor) { () async throws -> Bool in
            try await client.execute(status) { _ in
                MultiThreadedEventLoopGroup.currentEventLoop === client.taskExecutor.eventLoop
            }
        }
        #expect(onTheLinksLoop)
    }

    // MARK: Files

    @Test("download to a file with progress; the file appears only when complete")
    func download() async throws {
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        let path = temporaryPath("download.bin")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let count = 5 * 1024 * 1024
        let reports = TrackedMutex<[TransferProgress]>([])
        let head = try await client.download(AccessoryRequest(path: "/bytes/\(count)"), to: path) { progress in
            reports.withLock { $0.append(progress) }
        }
        #expect(head.status == .ok)
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(data.count == count)
        #expect(Digest.hex(.sha256, of: data) == expectedPatternSHA256(count: count))
        let seen = reports.withLock { $0 }
        #expect(seen.first?.bytesTransferred == 0)
        #expect(seen.last == TransferProgress(bytesTransferred: Int64(count), totalBytes: Int64(count)))
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.bytesTransferred <= $1.bytesTransferred })
    }

    @Test("download keeps the mode of the file it replaces; a new file gets 0666 less the umask")
    func downloadKeepsTheMode() async throws {
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        let path = temporaryPath("secret.bin")
        defer { try? FileManager.default.removeItem(atPath: path) }
        func mode() -> mode_t {
            var info = stat()
            return stat(path, &info) == 0 ? info.st_mode & 0o777 : 0
        }
        // A private file stays private (before: it became 0644).
        try "old".write(toFile: path, atomically: false, encoding: .utf8)
        #expect(chmod(path, 0o600) == 0)
        try await client.download(AccessoryRequest(path: "/bytes/1000"), to: path)
        #expect(mode() == 0o600)
        #expect((try Data(contentsOf: URL(fileURLWithPath: path))).count == 1000)
        // A new file: 0666 less the umask.
        try FileManager.default.removeItem(atPath: path)
        let mask = umask(0o027)
        defer { umask(mask) }
        try await client.download(AccessoryRequest(path: "/bytes/10"), to: path)
        #expect(mode() == 0o640)
    }

    @Test("a failed download leaves no file behind")
    func failedDownload() async throws {
        let client = makeEmulatorClient { $0.link.idleTimeout = .milliseconds(300) }
        defer { Task { await client.shutdown() } }
        let path = temporaryPath("never.bin")
        await #expect(throws: AccessoryClientError.self) {
            try await client.download(AccessoryRequest(path: "/delay/3"), to: path)
        }
        #expect(!FileManager.default.fileExists(atPath: path))
        let directory = (path as NSString).deletingLastPathComponent
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory).filter {
            $0.hasPrefix((path as NSString).lastPathComponent)
        }
        #expect(leftovers.isEmpty)
    }

    @Test("upload from a file with progress, checked by SHA-256")
    func upload() async throws {
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        let path = temporaryPath("upload.bin")
        defer { try? FileManager.default.removeItem(atPath: path) }
        var bytes = [UInt8](repeating: 0, count: 3 * 1024 * 1024 + 5)
        for index in bytes.indices { bytes[index] = UInt8(truncatingIfNeeded: index &* 7 &+ index >> 11) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let last = TrackedMutex<TransferProgress?>(nil)
        let (head, body) = try await client.upload(AccessoryRequest(method: .post, path: "/upload"), fromFile: path) {
            progress in
            last.withLock { $0 = progress }
        }
        #expect(head.status == .ok)
        let json = try jsonObject(body)
        #expect(json["length"] as? Int == bytes.count)
        #expect(json["sha256"] as? String == Digest.hex(.sha256, of: bytes))
        #expect(last.withLock { $0 }?.bytesTransferred == Int64(bytes.count))
    }

    @Test("a streamed request body of unknown length goes chunked", arguments: [false, true])
    func streamedUpload(expectContinue: Bool) async throws {
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        let parts = (0..<40).map { index in ByteBuffer(repeating: UInt8(index), count: 10_000 + index) }
        var expected = ByteBuffer()
        for var part in parts { expected.writeBuffer(&part) }
        var fields = HTTPFields()
        if expectContinue { fields[.expect] = "100-continue" }
        let request = AccessoryRequest(
            method: .put,
            path: "/upload",
            headerFields: fields,
            body: .stream { writer in
                for part in parts { try await writer.write(part) }
            }
        )
        let (head, body) = try await client.data(request)
        #expect(head.status == .ok)
        let json = try jsonObject(body)
        #expect(json["length"] as? Int == expected.readableBytes)
        #expect(json["sha256"] as? String == sha256(expected))
    }

    // MARK: Limits, timeouts, cancellation

    @Test("a body over the caller's limit fails clearly and the link stays usable")
    func collectLimit() async throws {
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        await #expect {
            _ = try await client.data(AccessoryRequest(path: "/bytes/100000"), maxBodySize: 1000)
        } throws: { error in
            (error as? AccessoryClientError)?.code == .responseTooLarge
        }
        let (head, _) = try await client.data(AccessoryRequest(path: "/status"))
        #expect(head.status == .ok)
        #expect(client.link.openCount == 1)
    }

    @Test("the whole-exchange timeout fires and the next request works")
    func exchangeTimeout() async throws {
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        let started = ContinuousClock.now
        await #expect {
            _ = try await client.data(AccessoryRequest(path: "/delay/5", timeout: .milliseconds(300)))
        } throws: { error in
            (error as? AccessoryClientError)?.code == .timedOut
        }
        #expect(ContinuousClock.now - started < .seconds(3))
        let (head, _) = try await client.data(AccessoryRequest(path: "/status"))
        #expect(head.status == .ok)
    }

    @Test("the idle timeout fires when the device goes silent")
    func idleTimeout() async throws {
        // Stretched under a sanitizer: the clean-clone AddressSanitizer pass saw the next
        // request's own first byte take over 0.3 s on a reopened link.
        let client = makeEmulatorClient { $0.link.idleTimeout = TimeBounds.scaled(.milliseconds(300)) }
        defer { Task { await client.shutdown() } }
        await #expect {
            _ = try await client.data(AccessoryRequest(path: "/delay/5"))
        } throws: { error in
            let error = error as? AccessoryClientError
            return error?.code == .timedOut && error?.message.contains("sent nothing") == true
        }
        let (head, _) = try await client.data(AccessoryRequest(path: "/status"))
        #expect(head.status == .ok)
    }

    @Test(
        "abandoning a body halfway: drained on one wire (the next request uses the same link), a fresh stream where the transport opens independent ones",
        arguments: [false, true]
    )
    func abandonedBody(independentStreams: Bool) async throws {
        let transport = EmulatedAccessory().socketPairTransport(
            on: MultiThreadedEventLoopGroup.singleton,
            opensIndependentStreams: independentStreams
        )
        let client = AccessoryClient(transport: transport)
        defer { Task { await client.shutdown() } }
        struct Enough: Error {}
        await #expect(throws: Enough.self) {
            try await client.execute(AccessoryRequest(path: "/bytes/2000000")) { response in
                var seen = 0
                for try await part in response.body {
                    seen += part.readableBytes
                    if seen > 100_000 { throw Enough() }
                }
            }
        }
        let (_, body) = try await client.data(AccessoryRequest(path: "/bytes/1000"))
        #expect(sha256(body) == expectedPatternSHA256(count: 1000))
        #expect(client.link.openCount == (independentStreams ? 2 : 1))
    }

    @Test("a body too large to drain gets the link reopened; the next response is still right")
    func abandonBeyondDrainLimit() async throws {
        let client = makeEmulatorClient { $0.link.drainLimit = 256 * 1024 }
        defer { Task { await client.shutdown() } }
        _ = try await client.execute(AccessoryRequest(path: "/bytes/20000000")) { response in
            response.status
        }
        let (_, body) = try await client.data(AccessoryRequest(path: "/bytes/5000"))
        #expect(sha256(body) == expectedPatternSHA256(count: 5000))
        #expect(client.link.openCount == 2)
    }

    @Test("cancelling the caller's task halfway through a large body")
    func cancellation() async throws {
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        let started = TrackedMutex(false)
        let task = Task {
            try await client.execute(AccessoryRequest(path: "/bytes/50000000")) { response in
                var seen = 0
                for try await part in response.body {
                    seen += part.readableBytes
                    started.withLock { $0 = true }
                }
                return seen
            }
        }
        while !started.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
        task.cancel()
        let result = await task.result
        #expect(throws: AccessoryClientError.self) { try result.get() }
        let (_, body) = try await withTimeLimit(10) {
            try await client.data(AccessoryRequest(path: "/bytes/4096"))
        }
        #expect(sha256(body) == expectedPatternSHA256(count: 4096))
    }

    @Test("a request that waits in line can be cancelled without disturbing the others")
    func cancelWhileQueued() async throws {
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        async let slow = client.data(AccessoryRequest(path: "/delay/0.5"))
        try await Task.sleep(for: .milliseconds(50))
        let queued = Task { try await client.data(AccessoryRequest(path: "/status")) }
        try await Task.sleep(for: .milliseconds(50))
        queued.cancel()
        let queuedResult = await queued.result
        #expect(throws: AccessoryClientError.self) { try queuedResult.get() }
        let (slowHead, _) = try await slow
        #expect(slowHead.status == .ok)
        let (head, _) = try await client.data(AccessoryRequest(path: "/status"))
        #expect(head.status == .ok)
        #expect(client.link.openCount == 1)
    }

    @Test("header values with CR or LF are refused before anything is sent")
    func headerInjection() async throws {
        #expect(throws: HTTPLinkError.self) { try RequestValidation.field(name: "X-A", value: "a\r\nX-B: b") }
        let client = makeEmulatorClient()
        defer { Task { await client.shutdown() } }
        for path in ["/status x", "/status\0", "/status\r\n", "/a\u{7F}"] {
            await #expect {
                _ = try await client.data(AccessoryRequest(path: path))
            } throws: { error in
                (error as? AccessoryClientError)?.code == .invalidRequest
            }
        }
        #expect(client.link.openCount == 0)
    }

    @Test("URLs: credentials, query and fragment")
    func urlParsing() throws {
        let request = try AccessoryRequest(url: "accessory://me:p%3Aw@printer/a/b?c=d#frag")
        #expect(request.path == "/a/b?c=d")
        #expect(request.credentials == Credentials(user: "me", password: "p:w"))
        #expect(try AccessoryRequest(url: "/status").path == "/status")
        #expect(try AccessoryRequest(url: "accessory://printer").path == "/")
        #expect(throws: AccessoryClientError.self) { try AccessoryRequest(url: "status") }
    }

    @Test("a shut-down client refuses new requests clearly")
    func shutdown() async throws {
        let client = makeEmulatorClient()
        _ = try await client.data(AccessoryRequest(path: "/status"))
        await client.shutdown()
        await #expect {
            _ = try await client.data(AccessoryRequest(path: "/status"))
        } throws: { error in
            (error as? AccessoryClientError)?.code == .shutDown
        }
    }
}
