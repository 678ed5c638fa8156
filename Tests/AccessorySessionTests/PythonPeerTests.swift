import AccessoryClient
import AccessorySession
import AccessoryTestSupport
import AccessoryTransport
import Foundation
import NIOCore
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The Swift opener against the independent responder written from docs/framing.md alone
/// (Tests/Fixtures/session-peer.py `serve`), over one socketpair that outlives every session.
extension SessionIOSuites {
    @Suite("session layer: the Python peer from the spec", .serialized)
    struct PythonPeerTests {
        static let peer = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/session-peer.py").path

        /// The peer serving one end of a socketpair; the host end is reopened (dup) per session.
        final class PeerLine: Sendable {
            let hostEnd: CInt
            let process: Process

            init() throws {
                let (host, device) = try SocketPairTransport.makeSocketPair()
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
                process.arguments = ["python3", PythonPeerTests.peer, "serve"]
                let handle = FileHandle(fileDescriptor: device, closeOnDealloc: false)
                process.standardInput = handle
                process.standardOutput = handle
                try process.run()
                close(device)
                self.hostEnd = host
                self.process = process
            }

            deinit {
                close(self.hostEnd)  // EOF: the peer exits
                self.process.terminate()
                self.process.waitUntilExit()
            }

            var transport: SharedLineEnd { SharedLineEnd(descriptor: self.hostEnd) }
        }

        @Test func startRequestsAndBodies() async throws {
            let line = try PeerLine()
            let client = AccessoryClient(transport: SessionTransport(wrapping: line.transport))
            let (status, json) = try await client.get("/status")
            #expect(status.status == .ok && String(buffer: json).contains("session-peer"))
            let (_, body) = try await client.get("/bytes/300000", maxBodySize: 1 << 20)
            #expect(Array(body.readableBytesView) == (0..<300_000).map { UInt8($0 % 251) })
            var echo = try AccessoryRequest(method: .post, url: "/echo")
            let upload = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            echo.body = .bytes(ByteBuffer(bytes: upload))
            let (_, echoed) = try await client.data(echo)
            #expect(Array(echoed.readableBytesView) == upload)
            await client.shutdown()
        }

        /// A download abandoned mid-body, 16 times: each next session starts at once and is clean,
        /// in band: the independent peer takes each new HELLO on the stream it already has.
        @Test func restartAfterAbandonedDownloads() async throws {
            let line = try PeerLine()
            let client = AccessoryClient(transport: SessionTransport(wrapping: line.transport))
            for attempt in 1...16 {
                _ = try await client.execute(try AccessoryRequest(url: "/bytes/1000000000")) { response in
                    for try await _ in response.body { break }
                }
                let started = ContinuousClock.now
                let (head, body) = try await client.get("/status")
                #expect(head.status == .ok && String(buffer: body).contains("session-peer"), "attempt \(attempt)")
                #expect(
                    ContinuousClock.now - started < TimeBounds.scaled(.seconds(1)),
                    "attempt \(attempt): \(ContinuousClock.now - started)"
                )
            }
            #expect(client.link.openCount == 1)
            #expect(client.link.renewalCount == 16)
            await client.shutdown()
        }

        /// With a 100 ms ping interval an idle link pings and is answered; it stays usable.
        @Test func pingOnAnIdleSession() async throws {
            let line = try PeerLine()
            var configuration = SessionTransport.Configuration()
            configuration.pingInterval = .milliseconds(100)
            let frames = FrameLog()
            configuration.tracer = { frames.append($0) }
            let client = AccessoryClient(
                transport: SessionTransport(wrapping: line.transport, configuration: configuration)
            )
            _ = try await client.get("/status")
            try await Task.sleep(for: .milliseconds(600))
            let (head, _) = try await client.get("/status")
            #expect(head.status == .ok)
            #expect(frames.lines.contains { $0.hasPrefix("> session PING") }, "\(frames.lines)")
            #expect(frames.lines.contains { $0.hasPrefix("< session PONG") }, "\(frames.lines)")
            await client.shutdown()
        }

        final class FrameLog: Sendable {
            private let storage = TrackedMutex<[String]>([])
            func append(_ line: String) { self.storage.withLock { $0.append(line) } }
            var lines: [String] { self.storage.withLock { $0 } }
        }
    }
}
