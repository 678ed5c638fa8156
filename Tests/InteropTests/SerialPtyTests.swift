import AccessoryClient
import AccessoryCrypto
import AccessoryEmulator
import AccessoryHTTP1
import AccessoryResponder
import AccessoryTestSupport
import Glibc
import HTTPTypes
import NIOCore
import NIOPosix  // for an event loop; see the report: Package.swift should list it for InteropTests
import Testing

/// The serial path end to end, with no socat: the emulated accessory served on a pty master
/// in raw mode, our client on the slave as `serial:/dev/pts/N`.
@Suite("serial path over a real pty")
struct SerialPtyTests {
    /// 4 MiB down and 2 MiB up; 2 MiB and 512 KiB under a sanitizer, whose pass checks memory,
    /// not scale: there, beside the other interop suites (the bridge moving 64 MiB through
    /// curl), one of the first transfers through the pty outlasted its 60 s deadline (a
    /// clean-clone run of d8e4530). Half of the big body is still left when the request is
    /// cancelled: four times the 256 KiB drain limit of `reopened` or more.
    static let bigSize = (TimeBounds.sanitized ? 2 : 4) * 1024 * 1024
    static let uploadSize = (TimeBounds.sanitized ? 512 : 2048) * 1024

    /// What the link does with the rest of the body of the request that is cancelled.
    enum AfterCancel: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// The default drain limit (4 MiB) covers the ~2 MiB left: drained, the link stays.
        case drained
        /// A 256 KiB drain limit does not: the line is closed, reopened, and the stale bytes the
        /// accessory is still sending are discarded until it goes quiet.
        case reopened

        var testDescription: String { self.rawValue }
    }

    @Test(arguments: AfterCancel.allCases)
    func emulatorOverRawPty(afterCancel: AfterCancel) async throws {
        let pty = try PseudoTerminal.open()
        // Holds the slave open for the whole test, as the cable stays plugged in while the host
        // closes and reopens the line: without it the master reads EIO whenever the client
        // closes its descriptor, and the responder would end the session.
        let holder = open(pty.slavePath, O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard holder >= 0 else {
            close(pty.master)
            throw TestFailure("cannot open \(pty.slavePath): \(String(cString: strerror(errno)))")
        }
        defer { close(holder) }

        let responder = EmulatedAccessory().makeResponder()
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        // `serve` owns the master from here on and closes it when the session ends.
        let server = Task { try await responder.serve(descriptor: pty.master, on: eventLoop) }
        defer { server.cancel() }

        // The link's notes (opened, drained, torn down, reopened) explain a failure.
        let notes = TraceNotes()
        try await withClient("serial:\(pty.slavePath)") { configuration in
            // A guard against a hang (the idle bound catches a stall), wider under a sanitizer.
            if TimeBounds.sanitized { configuration.defaultTimeout = .seconds(180) }
            if afterCancel == .reopened {
                configuration.link.drainLimit = 256 * 1024
                // The settle must outlast the ~2 MiB the accessory is still sending. Under
                // AddressSanitizer, beside the other interop suites, it sent 1.4 MB in the default
                // 3 s and the rest reached the next request as its status line (a clean-clone
                // run of 5ecee75); plain HTTP/1.1 cannot do better (the session layer can).
                configuration.link.settleMaxDuration = TimeBounds.scaled(.seconds(3))
            }
            configuration.link.tracer = notes.tracer
        } _: { client in
            do {
                try await Self.exercise(client, afterCancel: afterCancel)
            } catch {
                throw TestFailure("\(error); link notes: \(notes.text)")
            }
        }

        server.cancel()
        _ = try await withTimeout(.seconds(10), "stopping the responder") { try await server.value }
    }

    static func exercise(_ client: AccessoryClient, afterCancel: AfterCancel) async throws {
        // /status: the emulator's identity as JSON.
        let (statusHead, statusBody) = try await client.get("/status")
        #expect(statusHead.status == .ok)
        #expect(statusHead.headerFields[.contentType] == "application/json")
        #expect(statusBody.text.contains(#""model":"#))
        #expect(statusBody.text.contains(#""uptimeSeconds":"#))

        let pattern = sha256(EmulatedAccessory.patternBytes(offset: 0, count: Self.bigSize))

        // 4 MiB with Content-Length…
        let bytes = try await client.hashedBody(AccessoryRequest(path: "/bytes/\(Self.bigSize)"))
        #expect(bytes.head.status == .ok)
        #expect(bytes.head.headerFields[.contentLength] == String(Self.bigSize))
        #expect(bytes.count == Self.bigSize)
        #expect(bytes.sha256 == pattern)

        // …and chunked.
        let stream = try await client.hashedBody(AccessoryRequest(path: "/stream/\(Self.bigSize)"))
        #expect(stream.head.status == .ok)
        #expect(stream.head.headerFields[.transferEncoding] == "chunked")
        #expect(stream.count == Self.bigSize)
        #expect(stream.sha256 == pattern)

        // `uploadSize` up, hashed by the accessory.
        let upload = secureRandomBytes(Self.uploadSize)
        let (uploadHead, uploadBody) = try await client.data(
            AccessoryRequest(method: .post, path: "/upload", body: .bytes(ByteBuffer(bytes: upload)))
        )
        #expect(uploadHead.status == .ok)
        #expect(uploadBody.text.contains(#""length":\#(Self.uploadSize)"#))
        #expect(uploadBody.text.contains(#""sha256":"\#(sha256(upload))""#))

        // The same, streamed in pieces with Content-Length.
        let (streamedHead, streamedBody) = try await client.data(
            AccessoryRequest(
                method: .put,
                path: "/upload",
                body: .stream(length: upload.count) { writer in
                    var offset = 0
                    while offset < upload.count {
                        let end = min(offset + 50_000, upload.count)
                        try await writer.write(ByteBuffer(bytes: upload[offset..<end]))
                        offset = end
                    }
                }
            )
        )
        #expect(streamedHead.status == .ok)
        #expect(streamedBody.text.contains(#""sha256":"\#(sha256(upload))""#))

        #expect(client.link.openCount == 1, "every request so far rode one link")

        // Cancel a request halfway through a 4 MiB body…
        let halfway = AsyncStream<Void>.makeStream()
        let cancelled = Task {
            try await client.execute(AccessoryRequest(path: "/bytes/\(Self.bigSize)")) { response in
                var received = 0
                var signalled = false
                for try await chunk in response.body {
                    received += chunk.readableBytes
                    if received >= Self.bigSize / 2 && !signalled {
                        signalled = true
                        halfway.continuation.yield()
                        // Wait to be cancelled; give up after 30 s so the test stays bounded.
                        try await Task.sleep(for: .seconds(30))
                        throw TestFailure("the request was not cancelled")
                    }
                }
                return received
            }
        }
        let reachedHalf = try await withTimeout(.seconds(30), "reading half of /bytes") {
            for await _ in halfway.stream { return true }
            return false
        }
        #expect(reachedHalf)
        cancelled.cancel()
        let outcome = await cancelled.result
        switch outcome {
        case .success(let count):
            Issue.record("the cancelled request returned \(count) bytes instead of failing")
        case .failure(let error as AccessoryClientError):
            #expect(error.code == .cancelled, "\(error)")
        case .failure(let error):
            Issue.record("unexpected error type: \(error)")
        }

        // …and the next request gets its own, correct response (the rest of the abandoned body
        // was drained or the line was reopened and settled, never read as this response).
        let (afterHead, afterBody) = try await client.get("/status")
        #expect(afterHead.status == .ok)
        #expect(afterBody.text.contains(#""model":"#))
        let after = try await client.hashedBody(AccessoryRequest(path: "/bytes/1000"))
        #expect(after.sha256 == sha256(EmulatedAccessory.patternBytes(offset: 0, count: 1000)))
        #expect(client.link.openCount == (afterCancel == .drained ? 1 : 2))
    }
}
