import AccessoryBridge
import AccessoryClient
import AccessoryResponder
import AccessoryTestSupport
import AccessoryTransport
import Glibc
import Logging
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// A bridge over several links to one accessory (issue 11: the pool over several USB
/// interfaces; the USB VM test runs it on a gadget with two): each link here is its own
/// responder on a socketpair, which records what it served, so the checks are who served what,
/// not timing: a `/slow` request is held until its partner has arrived too (or 5 s pass), so
/// the two overlap however late the scheduler starts the second one, and a pool that put both
/// on one link would show it (the second could not arrive while the first is held). (Sharing one `accessory-http` link among clients: BridgeSharingTests.)
@Suite("The bridge's pool of links", .timeLimit(.minutes(2)))
struct BridgePoolTests {
    /// Requests each responder served, by index.
    final class Served: Sendable {
        let counts = Mutex<[Int]>([0, 0])
        /// `/slow` requests that have arrived, over all rounds; they come in pairs.
        let slowArrivals = Mutex(0)
        func add(_ index: Int) { self.counts.withLock { $0[index] += 1 } }
        var snapshot: [Int] { self.counts.withLock { $0 } }

        /// Holds a `/slow` request until the pair it belongs to is complete, at most 5 s.
        func awaitPartner() async throws {
            let arrived = self.slowArrivals.withLock { count -> Int in
                count += 1
                return count
            }
            guard arrived % 2 == 1 else { return }
            let clock = ContinuousClock()
            let deadline = clock.now + .seconds(5)
            while self.slowArrivals.withLock({ $0 }) == arrived, clock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
        }
    }

    private func client(_ index: Int, _ served: Served) -> AccessoryClient {
        let responder = HTTPResponder { request in
            served.add(index)
            if request.head.path == "/slow" { try await served.awaitPartner() }
            return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "link \(index)\n")))
        }
        let group = MultiThreadedEventLoopGroup.singleton
        let transport = SocketPairTransport(name: "link \(index)") { descriptor in
            let eventLoop = group.next()
            Task { try? await responder.serve(descriptor: descriptor, on: eventLoop) }
        }
        return AccessoryClient(transport: transport)
    }

    private func get(_ socket: String, _ path: String) async -> String {
        await offPool {
            guard let fd = connectUnixSocket(socket) else { return "no connection" }
            defer { close(fd) }
            let request = Array("GET \(path) HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".utf8)
            _ = request.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            return readToEnd(fd)
        }
    }

    @Test("requests at once go to different links; a lone one takes the first; status counts the links")
    func pool() async throws {
        let served = Served()
        let clients = [self.client(0, served), self.client(1, served)]
        let directory = try TemporaryDirectory("bridge-pool")
        let socket = directory.path("pool.sock")
        var logger = Logger(label: "test.bridge-pool")
        logger.logLevel = .warning
        let bridge = AccessoryBridge(clients: clients, logger: logger)
        _ = try await bridge.bind([.unix(path: socket)])
        let serving = Task { await bridge.run() }
        defer { directory.remove() }
        // Nothing below throws, so the shutdown at the end always runs.
        for round in 0..<16 {
            let before = served.snapshot
            async let first = self.get(socket, "/slow")
            async let second = self.get(socket, "/slow")
            let answers = await [first, second]
            let after = served.snapshot
            #expect(answers.allSatisfy { $0.hasPrefix("HTTP/1.1 200") }, "round \(round): \(answers)")
            #expect(
                Set(answers.map { $0.hasSuffix("link 0\n") ? 0 : $0.hasSuffix("link 1\n") ? 1 : -1 }) == [0, 1],
                "\(answers)"
            )
            #expect(after[0] - before[0] == 1 && after[1] - before[1] == 1, "round \(round): \(before) → \(after)")
        }
        let lone = await self.get(socket, "/fast")
        #expect(lone.hasSuffix("link 0\n"), "a lone request did not take the first link: \(lone)")
        let status = await self.get(socket, "/.well-known/accessory-http/status")
        #expect(status.contains("\"link\":{\"count\":2,\"opens\":2,"), "\(status)")
        await bridge.shutdown()
        await serving.value
        for client in clients { await client.shutdown() }
    }
}
