import AccessoryClient
import AccessoryResponder
import AccessorySession
import AccessoryTestSupport
import AccessoryTransport
import NIOCore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A host that dies in the middle of an upload to a handler that does not read it leaves the
/// rest of its bytes in the line; the next host's HELLO comes behind them. The responder reads
/// ahead of its HTTP layer (up to `SessionResponderHandler.readAheadLimit`), so that HELLO is
/// found without waiting for the handler, and the abandoned handler is cancelled.
extension SessionIOSuites {
    @Suite("session layer: a host that dies mid-upload")
    struct DeadUploaderTests {
        /// How the host that dies speaks.
        enum DeadHost: String, CaseIterable, CustomStringConvertible, Sendable {
            /// In a session of its own (HELLO, then DATA frames).
            case inASession
            /// Plain HTTP/1.1.
            case plain

            var description: String { self.rawValue }
        }

        /// 16 tries on one socketpair served by one responder: a raw host (in a session, or
        /// plain) starts a `POST /sink` of 64 MiB that the handler never reads, writes its body
        /// until the line has been full for 300 ms (at most 768 KiB, maybe stopping inside a
        /// frame) and dies. Then a new session client on the same line: its `/status` is
        /// answered within 1 s, and the dead host's handler has been cancelled.
        @Test(arguments: DeadHost.allCases)
        func theNextHostIsAnsweredWhileTheHandlerHoldsTheLineBack(deadHost: DeadHost) async throws {
            let probe = CancellationProbe()
            let responder = HTTPResponder { request in
                if request.head.path == "/sink" {
                    try await probe.wait(for: .seconds(3600))
                }
                return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "ok")))
            }
            let (host, device) = try SocketPairTransport.makeSocketPair()
            let server = Task { try await responder.serve(descriptor: device) }
            defer {
                server.cancel()
                close(host)
            }
            for attempt in 1...16 {
                let written = try await Self.uploadAndDie(on: host, deadHost, limit: 768 << 10)
                #expect(
                    await probe.holds(within: TimeBounds.scaled(.seconds(2))) { $0.started == attempt },
                    "attempt \(attempt): the handler did not start"
                )

                let client = AccessoryClient(transport: SessionTransport(wrapping: SharedLineEnd(descriptor: host)))
                let started = ContinuousClock.now
                do {
                    let (head, body) = try await client.get("/status")
                    #expect(head.status == .ok, "attempt \(attempt)")
                    #expect(String(buffer: body) == "ok", "attempt \(attempt)")
                } catch {
                    Issue.record("attempt \(attempt), \(written) bytes left by the dead host: \(error)")
                }
                #expect(
                    ContinuousClock.now - started < TimeBounds.scaled(.seconds(1)),
                    "attempt \(attempt), \(written) bytes left by the dead host: \(ContinuousClock.now - started)"
                )
                #expect(
                    await probe.holds(within: TimeBounds.scaled(.milliseconds(500))) { $0.cancelled == attempt },
                    "attempt \(attempt): the dead host's handler was not cancelled"
                )
                await client.shutdown()
            }
        }

        /// Writes `POST /sink` with a 64 MiB body (plain, or a HELLO and then DATA frames)
        /// without reading anything, until `limit` bytes are written or the line stayed full
        /// for 300 ms. Returns how many bytes were written.
        static func uploadAndDie(on descriptor: CInt, _ deadHost: DeadHost, limit: Int) async throws -> Int {
            let nonce = UInt64.random(in: 1...UInt64.max)
            var line = ByteBuffer()
            var stream = ByteBuffer(string: "POST /sink HTTP/1.1\r\nHost: a\r\nContent-Length: 67108864\r\n\r\n")
            stream.writeRepeatingByte(0x5A, count: limit)
            if deadHost == .plain {
                return try await Self.write(Array(stream.readableBytesView.prefix(limit)), to: descriptor)
            }
            SessionFrame(
                .hello,
                nonce: nonce,
                sequence: 0,
                payload: SessionFrame.handshakePayload(
                    version: SessionFrame.version,
                    maxFrame: SessionFrame.maxFrameSize
                )
            ).encode(into: &line)
            var sequence: UInt32 = 1
            while line.readableBytes < limit,
                let chunk = stream.readSlice(length: min(SessionFrame.maxPayload, stream.readableBytes))
            {
                SessionFrame.encode(.data, nonce: nonce, sequence: sequence, payload: chunk, into: &line)
                sequence += 1
            }
            return try await Self.write(Array(line.readableBytesView.prefix(limit)), to: descriptor)
        }

        /// Writes `bytes` until all are written or the line stayed full for 300 ms; returns how
        /// many were written.
        static func write(_ bytes: [UInt8], to descriptor: CInt) async throws -> Int {
            var written = 0
            var fullSince: ContinuousClock.Instant?
            while written < bytes.count {
                let count = bytes[written...].withUnsafeBytes {
                    send(descriptor, $0.baseAddress, $0.count, CInt(MSG_DONTWAIT | MSG_NOSIGNAL))
                }
                if count > 0 {
                    written += count
                    fullSince = nil
                    continue
                }
                guard count < 0, errno == EAGAIN || errno == EWOULDBLOCK else {
                    Issue.record("send: \(String(cString: strerror(errno)))")
                    break
                }
                let since = fullSince ?? .now
                fullSince = since
                if ContinuousClock.now - since > .milliseconds(300) { break }
                try await Task.sleep(for: .milliseconds(5))
            }
            return written
        }
    }
}
