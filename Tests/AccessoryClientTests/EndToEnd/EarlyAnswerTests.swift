import AccessoryClient
import AccessoryEmulator
import AccessoryResponder
import AccessorySession
import AccessoryTestSupport
import AccessoryTransport
import HTTPTypes
import NIOCore
import NIOPosix
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A device may answer a request before it has read the body (RFC 9112 §9.3): a 405, a 413, a
/// handler that never wanted the body. The answer is the exchange's result, and the link is in
/// step for the next request. Before 2026-11-30 a streamed upload answered that way failed
/// after the answer had arrived: "the device closed the link before the response was complete"
/// (`post --data @16MiB /delay/2` printed the body and exited 69).
@Suite(.timeLimit(.minutes(2)))
struct EarlyAnswerTests {
    /// How the upload is framed, which decides how the responder answers early: with a length
    /// over its drain limit (1 MiB) it answers `Connection: close` at once; without one it
    /// answers keep-alive, drains up to the limit and then ends the link while the host still
    /// sends.
    enum Framing: String, CaseIterable, CustomStringConvertible, Sendable {
        case contentLength, chunked
        var description: String { self.rawValue }
    }

    /// What carries the link.
    enum Carrier: String, CaseIterable, CustomStringConvertible, Sendable {
        /// The emulator on socketpairs: a fresh one per open.
        case socketpairs
        /// One line and one responder for all of it, with the session layer: the responder ends
        /// a session, not the line, and drops the rest of the host's frames of that session
        /// (before 2026-11-30 it read them as a plain request and closed the line).
        case session
        /// HTTP/2 on socketpairs: the answer ends the stream while its request body still goes
        /// out (RFC 9113 §8.1).
        case http2
        var description: String { self.rawValue }
    }

    static let uploadSize = 3 << 20

    /// 16 tries: a 3 MiB streamed `POST /status` gets the emulator's 405 (it never reads the
    /// body), delivered as the result; then `GET /status` is answered within 1 s.
    @Test(arguments: Framing.allCases, Carrier.allCases)
    func anAnswerBeforeTheBodyEndsIsTheResult(framing: Framing, carrier: Carrier) async throws {
        try await self.withClient(carrier) { client in
            for attempt in 1...16 {
                let length = framing == .contentLength ? Self.uploadSize : nil
                let request = AccessoryRequest(
                    method: .post,
                    path: "/status",
                    body: .stream(length: length) { writer in
                        let block = ByteBuffer(repeating: UInt8(attempt), count: 64 << 10)
                        for _ in 0..<(Self.uploadSize / block.readableBytes) { try await writer.write(block) }
                    }
                )
                let (head, body) = try await client.data(request, maxBodySize: 4096)
                #expect(head.status == .methodNotAllowed, "attempt \(attempt)")
                #expect(String(buffer: body).contains("method not allowed"), "attempt \(attempt)")
                let started = ContinuousClock.now
                let (next, _) = try await client.get("/status")
                #expect(next.status == .ok, "attempt \(attempt)")
                #expect(
                    ContinuousClock.now - started < TimeBounds.scaled(.seconds(1)),
                    "attempt \(attempt): \(ContinuousClock.now - started)"
                )
            }
        }
    }

    private func withClient(_ carrier: Carrier, _ body: (AccessoryClient) async throws -> Void) async throws {
        switch carrier {
        case .socketpairs, .http2:
            let client = makeEmulatorClient { if carrier == .http2 { $0.link.httpVersion = .http2 } }
            do {
                try await body(client)
            } catch {
                await client.shutdown()
                throw error
            }
            await client.shutdown()
        case .session:
            let (host, device) = try SocketPairTransport.makeSocketPair()
            let responder = EmulatedAccessory().makeResponder()
            let server = Task { try await responder.serve(descriptor: device) }
            let client = AccessoryClient(transport: SessionTransport(wrapping: SharedLineEnd(descriptor: host)))
            var failure: (any Error)?
            do {
                // One responder serves the line throughout: every next answer came from it, so
                // the early answer ended a session, never the line; and the host started each
                // next session in band, never reopening the line (before 2026-11-30 it reopened
                // after the device's CLOSE).
                try await body(client)
                #expect(client.link.openCount == 1)
                #expect(client.link.renewalCount >= 16)
            } catch {
                failure = error
            }
            await client.shutdown()
            server.cancel()
            _ = await server.result
            close(host)
            if let failure { throw failure }
        }
    }
}
