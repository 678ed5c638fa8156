import AccessoryClient
import AccessoryEmulator
import AccessoryResponder
import AccessorySession
import AccessoryTestSupport
import AccessoryTransport
import NIOCore
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A side that is slow to read holds the other back, and neither takes that for a fault: the
/// responder's 250 ms stall rule (docs/framing.md §5) and the host's liveness bound (§4) count
/// only time spent asking for bytes. A frame cut in two by the responder's own back-pressure is
/// not one a dead host left unfinished; a device that waits for a host which is not reading is
/// not a silent device.
extension SessionIOSuites {
    @Suite("session layer: a side slow to read")
    struct SlowReaderTests {
        /// How a slow reader of a download stops.
        enum Pause: String, CaseIterable, CustomStringConvertible, Sendable {
            /// It awaits something else: the link holds the device back.
            case suspends
            /// It blocks the thread it runs on, the link's own event loop (as the CLI does when a
            /// write to a full stdout pipe blocks): nothing of the link runs, its timers run late.
            case blocksTheLinkThread

            var description: String { self.rawValue }
        }

        /// 16 tries on one line: a 1 MiB upload in session frames to a handler that waits 400 ms
        /// before it reads the body, so the responder stops reading with part of a frame in hand
        /// for longer than the stall bound. Each upload is answered with its byte count, and a
        /// request after it within its bound, in the same session.
        @Test func uploadToAHandlerThatWaitsIsTakenWhole() async throws {
            let size = 1 << 20
            let responder = HTTPResponder { request in
                if request.head.path == "/upload" {
                    try await Task.sleep(for: .milliseconds(400))
                }
                var received = 0
                for try await part in request.body { received += part.readableBytes }
                return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "\(received)")))
            }
            try await self.withOneSession(served: responder) { client in
                try await self.uploadsAreCounted(client, path: "/upload", size: size, tries: 16)
            }
        }

        /// 16 tries on one session with a liveness bound of 200 ms (a PING after 200 ms of
        /// silence, failure after 400 ms): a 4 MiB download whose reader stops for 1 s after its
        /// first part (under a sanitizer: 4 tries, all of it five times longer), awaiting or
        /// blocking the link's own thread. The host holds the device back meanwhile; the download still arrives whole
        /// and right, and `/status` is answered after it within its bound.
        @Test(arguments: Pause.allCases)
        func downloadReadAfterAPauseIsNotTakenForASilentDevice(pause: Pause) async throws {
            let size = 4 << 20
            let expected = EmulatedAccessory.patternBytes(offset: 0, count: size)
            let responder = EmulatedAccessory().makeResponder()
            // Under a sanitizer the device may truly be slow for 400 ms: five times the bound and
            // the pause there, and four tries.
            let stretch = TimeBounds.sanitized ? 5 : 1
            var session = SessionTransport.Configuration()
            session.pingInterval = .milliseconds(200) * stretch
            try await self.withOneSession(served: responder, configuration: session) { client in
                for attempt in 1...(TimeBounds.sanitized ? 4 : 16) {
                    let executor: (any TaskExecutor)? = pause == .blocksTheLinkThread ? client.taskExecutor : nil
                    let (status, received, right) = try await withTaskExecutorPreference(executor) {
                        try await client.execute(AccessoryRequest(path: "/bytes/\(size)")) { response in
                            var received = 0
                            var right = true
                            var paused = false
                            for try await part in response.body {
                                right =
                                    right
                                    && part.withUnsafeReadableBytes { got in
                                        expected[received...].prefix(got.count).withUnsafeBytes { want in
                                            guard got.count == want.count, let a = got.baseAddress,
                                                let b = want.baseAddress
                                            else { return got.count == want.count }
                                            return memcmp(a, b, got.count) == 0
                                        }
                                    }
                                received += part.readableBytes
                                if !paused {
                                    paused = true
                                    switch pause {
                                    case .suspends: try await Task.sleep(for: .seconds(1) * stretch)
                                    case .blocksTheLinkThread: usleep(1_000_000 * UInt32(stretch))
                                    }
                                }
                            }
                            return (response.status, received, right)
                        }
                    }
                    #expect(status == .ok, "attempt \(attempt)")
                    #expect(received == size, "attempt \(attempt)")
                    #expect(right, "attempt \(attempt)")
                    try await self.expectPromptAnswer(client, "/status", attempt: attempt)
                }
            }
        }

        /// The other direction: a device that takes an upload slowly (256 KiB/s, paced against
        /// the clock) holds the host back, and the host's PING waits behind the DATA already in
        /// the line (NIO's outbound buffer, the socket's and what the device reads ahead: over a
        /// second of it at that rate), so its PONG comes late. With a liveness bound of 500 ms
        /// (failure after 1 s), each upload must still be answered with its byte count in the
        /// same session: a device that keeps taking bytes is not silent (the host sees it take
        /// them through the socket's send queue). 4 tries of 768 KiB (under a sanitizer the
        /// bound is five times longer and so is the upload). Before 2026-11-30 the host ended
        /// the session as dead on the first ("the device sent nothing, not even an answer to a
        /// ping, for 1182 ms"). `DeadDeviceTests` checks that this costs a dead device no time.
        @Test func uploadToASlowDeviceIsNotTakenForASilentDevice() async throws {
            let stretch = TimeBounds.sanitized ? 5 : 1
            let size = (768 << 10) * stretch
            let rate = 256 << 10
            let responder = HTTPResponder { request in
                let clock = ContinuousClock()
                let started = clock.now
                var received = 0
                for try await part in request.body {
                    received += part.readableBytes
                    try await clock.sleep(until: started + .microseconds(received * 1_000_000 / rate))
                }
                return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "\(received)")))
            }
            var session = SessionTransport.Configuration()
            session.pingInterval = .milliseconds(500) * stretch
            try await self.withOneSession(served: responder, configuration: session) { client in
                try await self.uploadsAreCounted(client, path: "/slow-upload", size: size, tries: 4)
            }
        }

        /// A session client on one end of a socketpair, `responder` serving the other end, for
        /// `body`; then the client, the server and the host's end are ended, pass or fail. All of
        /// it must have been one session: the line opened once, the session never restarted (no
        /// stall or silence was taken for a fault).
        private func withOneSession(
            served responder: HTTPResponder,
            configuration: SessionTransport.Configuration = .init(),
            _ body: (AccessoryClient) async throws -> Void
        ) async throws {
            let (host, device) = try SocketPairTransport.makeSocketPair()
            let server = Task { try await responder.serve(descriptor: device) }
            let client = AccessoryClient(
                transport: SessionTransport(wrapping: SharedLineEnd(descriptor: host), configuration: configuration)
            )
            var failure: (any Error)?
            do {
                try await body(client)
                #expect(client.link.openCount == 1)
                #expect(client.link.renewalCount == 0)
            } catch {
                failure = error
            }
            await client.shutdown()
            server.cancel()
            close(host)
            if let failure { throw failure }
        }

        /// `tries` uploads of `size` bytes to `path`, each answered 200 with its byte count, and
        /// each followed by a prompt answer to `/next`.
        private func uploadsAreCounted(_ client: AccessoryClient, path: String, size: Int, tries: Int) async throws {
            for attempt in 1...tries {
                let upload = AccessoryRequest(
                    method: .post,
                    path: path,
                    body: .bytes(ByteBuffer(repeating: UInt8(truncatingIfNeeded: attempt), count: size))
                )
                let (head, body) = try await client.data(upload, maxBodySize: 64)
                #expect(head.status == .ok, "attempt \(attempt)")
                #expect(String(buffer: body) == "\(size)", "attempt \(attempt)")
                try await self.expectPromptAnswer(client, "/next", attempt: attempt)
            }
        }

        /// `GET path` is answered 200 within 1 s.
        private func expectPromptAnswer(_ client: AccessoryClient, _ path: String, attempt: Int) async throws {
            let started = ContinuousClock.now
            let (head, _) = try await client.get(path)
            #expect(head.status == .ok, "attempt \(attempt)")
            #expect(
                ContinuousClock.now - started < TimeBounds.scaled(.seconds(1)),
                "attempt \(attempt): \(ContinuousClock.now - started)"
            )
        }
    }
}
