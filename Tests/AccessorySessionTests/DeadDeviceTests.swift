import AccessoryClient
import AccessoryResponder
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

/// How fast the host finds a device that is gone, at the I/O level (docs/framing.md §4): twice
/// the ping interval after the last thing it heard, whatever the host was sending. Telling a slow
/// device from a dead one (a device still taking a backlog of our bytes is alive) must not buy a
/// dead one time: bytes that leave the host's buffer into the kernel's, or a PING the device read
/// without answering, prove nothing.
extension SessionIOSuites {
    @Suite("session layer: a dead device is found within its bound")
    struct DeadDeviceTests {
        /// What the device does after it answered HELLO.
        enum Death: String, CaseIterable, CustomStringConvertible, Sendable {
            /// It reads nothing more (a hung firmware, a stalled endpoint).
            case stopsReading
            /// It reads and drops everything and never answers (its reader lives, the rest hangs).
            case readsButNeverAnswers

            var description: String { self.rawValue }
        }

        /// What the host sends when the device dies.
        enum Load: String, CaseIterable, CustomStringConvertible, Sendable {
            /// `GET /status`: a few bytes, into an empty line.
            case get
            /// `POST` of 8 MiB: the line stays full.
            case upload

            var description: String { self.rawValue }
        }

        /// A device that completed the handshake and then died: the request fails with the
        /// session's "peer dead" error between 2 and 2.5 ping intervals (the timer looks every
        /// half interval) after it started, plus 250 ms of slack; never later. Then a live
        /// responder takes over the same line and the next request is answered within 1 s.
        @Test(arguments: Death.allCases, Load.allCases)
        func deadDeviceIsFoundWithinTwicePingInterval(death: Death, load: Load) async throws {
            let interval = TimeBounds.scaled(.milliseconds(400))
            let (host, device) = try SocketPairTransport.makeSocketPair()
            defer {
                close(host)
                close(device)
            }
            let fake = FakeDevice(descriptor: device, drains: death == .readsButNeverAnswers)
            fake.start()
            var configuration = SessionTransport.Configuration()
            configuration.pingInterval = interval
            let client = AccessoryClient(
                transport: SessionTransport(wrapping: SharedLineEnd(descriptor: host), configuration: configuration)
            )
            let request =
                switch load {
                case .get: AccessoryRequest(path: "/status")
                case .upload:
                    AccessoryRequest(
                        method: .post,
                        path: "/upload",
                        body: .bytes(ByteBuffer(repeating: 7, count: 8 << 20))
                    )
                }
            let started = ContinuousClock.now
            let outcome: Result<Void, any Error>
            do {
                _ = try await client.data(request, maxBodySize: 64)
                outcome = .success(())
            } catch {
                outcome = .failure(error)
            }
            let took = ContinuousClock.now - started
            fake.stop()
            #expect(fake.answeredHello, "the fake device never saw a HELLO")
            switch outcome {
            case .success:
                Issue.record("a dead device answered")
            case .failure(let error):
                #expect("\(error)".contains("not even an answer to a ping"), "\(error)")
            }
            // The handshake itself is part of `took`: it is answered at once.
            #expect(took >= interval * 2, "\(took)")
            #expect(took < interval * 5 / 2 + TimeBounds.scaled(.milliseconds(250)), "\(took)")

            // A live responder on the same line: it finds the next HELLO among what is left.
            let responderCopy = dup(device)
            let server = Task {
                try await HTTPResponder { _ in ResponderResponse(status: .ok) }.serve(descriptor: responderCopy)
            }
            let nextStarted = ContinuousClock.now
            let next = try await client.get("/status")
            #expect(next.0.status == .ok)
            #expect(
                ContinuousClock.now - nextStarted < TimeBounds.scaled(.seconds(1)),
                "\(ContinuousClock.now - nextStarted)"
            )
            await client.shutdown()
            server.cancel()
            _ = await server.result
        }
    }
}

/// A device end that answers the first HELLO it reads with a HELLO_ACK and then dies: it reads
/// nothing more, or reads and drops everything without answering. Runs on a thread of its own
/// (blocking reads), until ``stop()``.
private final class FakeDevice: Sendable {
    private let descriptor: CInt
    private let drains: Bool
    private let state = Mutex<(stopped: Bool, answered: Bool, done: Bool)>((false, false, false))

    init(descriptor: CInt, drains: Bool) {
        self.descriptor = descriptor
        self.drains = drains
    }

    var answeredHello: Bool { self.state.withLock { $0.answered } }

    func start() {
        Thread.detachNewThread { self.run() }
    }

    /// Stops the thread and waits for it.
    func stop() {
        self.state.withLock { $0.stopped = true }
        while !self.state.withLock({ $0.done }) { usleep(1_000) }
    }

    private func run() {
        defer { self.state.withLock { $0.done = true } }
        var input: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while !self.state.withLock({ $0.stopped }) {
            let answered = self.answeredHello
            if answered && !self.drains {
                usleep(5_000)
                continue
            }
            var poller = pollfd(fd: self.descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 20) > 0 else { continue }
            let count = chunk.withUnsafeMutableBytes { read(self.descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { return }
            if answered { continue }  // draining
            input += chunk[0..<count]
            if let nonce = Self.helloNonce(in: input) {
                var reply = ByteBuffer()
                SessionFrame(
                    .helloAck,
                    nonce: nonce,
                    sequence: 0,
                    payload: SessionFrame.handshakePayload(version: 1, maxFrame: SessionFrame.maxFrameSize)
                ).encode(into: &reply)
                let bytes = Array(reply.readableBytesView)
                _ = bytes.withUnsafeBytes { write(self.descriptor, $0.baseAddress, $0.count) }
                self.state.withLock { $0.answered = true }
            }
        }
    }

    /// The nonce of the first whole HELLO frame in `bytes` (docs/framing.md §1: magic, format,
    /// type, flags, nonce, sequence, length, header CRC; then payload and frame CRC).
    private static func helloNonce(in bytes: [UInt8]) -> UInt64? {
        var index = 0
        while index + SessionFrame.headerSize <= bytes.count {
            defer { index += 1 }
            guard Array(bytes[index..<index + 4]) == SessionFrame.magic,
                bytes[index + 5] == SessionFrame.Kind.hello.rawValue
            else { continue }
            let length = bytes[(index + 20)..<(index + 24)].reduce(0) { $0 << 8 | Int($1) }
            guard index + SessionFrame.overhead + length <= bytes.count else { return nil }
            return bytes[(index + 8)..<(index + 16)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        }
        return nil
    }
}
