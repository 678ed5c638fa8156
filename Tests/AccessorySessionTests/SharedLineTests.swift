import AccessoryClient
import AccessoryCrypto
import AccessoryEmulator
import AccessoryResponder
import AccessorySession
import AccessoryTestSupport
import AccessoryTransport
import Foundation
import NIOCore
import NIOPosix
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The suites that move real bytes through processes and sockets run one after another: the
/// fault soak's load must not stretch the others' time bounds.
@Suite(.serialized) struct SessionIOSuites {}

/// How a shared line is made.
enum LineKind: String, CaseIterable, CustomStringConvertible, Sendable {
    /// One socketpair: every `open` of the host side is a `dup` of its host end.
    case socketpair
    /// A pty in raw mode: the accessory serves the master, the host opens the slave by its path
    /// with `SerialTransport` each time, as it would open /dev/ttyACM0.
    case pty

    var description: String { self.rawValue }
}

/// A byte stream that behaves like a serial line: the emulated accessory serves the device end
/// for the whole test, and whatever it still sends after a host gave up waits there for the next
/// open (a socketpair end the host `dup`s, or a pty slave kept open by `hostEnd`).
final class SharedLine: Sendable {
    let hostEnd: CInt
    let server: Task<Void, any Error>
    let slavePath: String?

    init(_ kind: LineKind = .socketpair) throws {
        let responder = EmulatedAccessory().makeResponder()
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        switch kind {
        case .socketpair:
            let (host, device) = try SocketPairTransport.makeSocketPair()
            self.hostEnd = host
            self.slavePath = nil
            self.server = Task { try await responder.serve(descriptor: device, on: eventLoop) }
        case .pty:
            let pty = try PseudoTerminal.open()
            // Held open for the test, so the line never hangs up between two hosts' opens.
            let holder = open(pty.slavePath, O_RDWR | O_NOCTTY | O_CLOEXEC)
            guard holder >= 0 else {
                close(pty.master)
                throw TransportError(.openFailed, "cannot open \(pty.slavePath): \(String(cString: strerror(errno)))")
            }
            self.hostEnd = holder
            self.slavePath = pty.slavePath
            self.server = Task { try await responder.serve(descriptor: pty.master, on: eventLoop) }
        }
    }

    deinit {
        self.server.cancel()
        close(self.hostEnd)
    }

    var transport: any ByteStreamTransport {
        if let slavePath = self.slavePath { return SerialTransport(path: slavePath) }
        return SharedLineEnd(descriptor: self.hostEnd)
    }
}

/// The session layer over a shared line, through the client API: abandoned answers never put
/// the next request out of step, and every body that is delivered is the right one.
extension SessionIOSuites {
    @Suite("session layer: a shared line", .serialized)
    struct SharedLineTests {
        func client(_ line: SharedLine) -> AccessoryClient {
            AccessoryClient(transport: SessionTransport(wrapping: line.transport))
        }

        /// 16 times: a download of 1 GB abandoned after its first megabyte, then `/status` answered
        /// within 1 s on the same line — by a new session started in band: the line is opened
        /// once for all of them.
        @Test func abandonedDownloadsNeverDelayTheNext() async throws {
            let line = try SharedLine()
            let client = self.client(line)
            for attempt in 1...16 {
                let received = try await client.abandonLargeDownload()
                #expect(received >= 1 << 20, "attempt \(attempt)")
                let started = ContinuousClock.now
                let (head, body) = try await client.get("/status")
                #expect(head.status == .ok, "attempt \(attempt)")
                #expect(body.readableBytes > 0)
                #expect(
                    ContinuousClock.now - started < TimeBounds.scaled(.seconds(1)),
                    "attempt \(attempt): \(ContinuousClock.now - started)"
                )
            }
            #expect(client.link.openCount == 1)
            #expect(client.link.renewalCount == 16)
            await client.shutdown()
        }

        /// A deadline of 300 ms on an endless download ends the call by then (plus scheduling), and
        /// the next request is answered within 1 s.
        @Test func deadlineMidBodyThenNext() async throws {
            let line = try SharedLine()
            let client = self.client(line)
            for attempt in 1...4 {
                var request = try AccessoryRequest(url: "/bytes/1000000000")
                request.timeout = .milliseconds(300)
                let started = ContinuousClock.now
                await #expect(throws: AccessoryClientError.self) {
                    _ = try await client.data(request, maxBodySize: 1 << 31)
                }
                #expect(
                    ContinuousClock.now - started < TimeBounds.scaled(.milliseconds(900)),
                    "attempt \(attempt): \(ContinuousClock.now - started)"
                )
                let next = ContinuousClock.now
                let (head, _) = try await client.get("/status")
                #expect(head.status == .ok)
                #expect(
                    ContinuousClock.now - next < TimeBounds.scaled(.seconds(1)),
                    "attempt \(attempt): \(ContinuousClock.now - next)"
                )
            }
            // Each deadline ended its session; the next started in band on the line opened once.
            #expect(client.link.openCount == 1)
            #expect(client.link.renewalCount == 4)
            await client.shutdown()
        }

        /// Bodies of many sizes (uploads echoed, downloads of the emulator's pattern) arrive whole
        /// and right, through DATA frames of every length.
        @Test func bodiesArriveIntact() async throws {
            let line = try SharedLine()
            let client = self.client(line)
            for size in [0, 1, 16351, 16352, 16353, 65536, 1 << 20, 8 << 20] {
                let (head, body) = try await client.get("/bytes/\(size)", maxBodySize: 16 << 20)
                #expect(head.status == .ok)
                let expected = EmulatedAccessory.patternBytes(offset: 0, count: size)
                #expect(
                    Digest.hex(.sha256, of: Array(body.readableBytesView)) == Digest.hex(.sha256, of: expected),
                    "size \(size)"
                )
            }
            for size in [0, 1, 16352, 100_000] {
                let upload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
                var request = try AccessoryRequest(method: .post, url: "/echo")
                request.body = .bytes(ByteBuffer(bytes: upload))
                let (head, body) = try await client.data(request)
                #expect(head.status == .ok, "echo \(size)")
                let json = try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
                #expect(json?["bodyLength"] as? Int == size, "echo \(size)")
            }
            await client.shutdown()
        }
    }
}
