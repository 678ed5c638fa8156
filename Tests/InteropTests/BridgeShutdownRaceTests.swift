import AccessoryBridge
import AccessoryClient
import AccessoryEmulator
import AccessoryTestSupport
import Foundation
import Glibc
import NIOPosix
import Synchronization
import Testing

/// A bridge that shuts down while clients connect. NIO hands an accepted connection to the
/// listener's stream wrapped as a `NIOAsyncChannel`, and drops it when the stream has ended;
/// dropped unended, such a channel traps ("Deinited NIOAsyncWriter without calling finish()"),
/// which crashed this test target twice in CI (2026-12-06). Every accepted client must instead
/// see its connection closed, and the next bridge on the same path must answer.
@Suite struct BridgeShutdownRaceTests {
    /// 24 tries: a thread connects to the bridge's socket as fast as it can (holding each
    /// connection open) while the bridge shuts down. Each connection that was made is closed by
    /// the bridge within 2 s of the shutdown (none left hanging), the shutdown and `run()` end
    /// within 5 s, and after the loop a new bridge on the path answers its status request.
    @Test func connectionsArrivingDuringShutdownAreEachClosedAndTheNextBridgeAnswers() async throws {
        let directory = try TemporaryDirectory("shutdown-race")
        defer { directory.remove() }
        let path = directory.path("accessory.sock")
        let client = AccessoryClient(
            transport: EmulatedAccessory().socketPairTransport(on: MultiThreadedEventLoopGroup.singleton)
        )
        for attempt in 0..<24 {
            let bridge = AccessoryBridge(client: client)
            _ = try await bridge.bind([.unix(path: path)])
            let serving = Task { await bridge.run() }
            let connector = Connector(path: path)
            connector.start()
            // Sometimes before run() began, sometimes while it serves: both must end cleanly.
            if attempt % 3 != 0 { try await Task.sleep(for: .milliseconds(attempt % 5 * 2)) }
            let started = ContinuousClock.now
            await bridge.shutdown()
            await serving.value
            let stopping = started.duration(to: .now)
            let descriptors = connector.stop()
            #expect(stopping < TimeBounds.scaled(.seconds(5)), "try \(attempt): shutdown and run() took \(stopping)")
            let hanging = descriptors.filter { !Self.endsWithin(.seconds(2), $0) }
            #expect(hanging.isEmpty, "try \(attempt): \(hanging.count) of \(descriptors.count) connections left open")
            for descriptor in descriptors { close(descriptor) }
        }
        let bridge = AccessoryBridge(client: client)
        _ = try await bridge.bind([.unix(path: path)])
        let serving = Task { await bridge.run() }
        let answer = await Self.statusRequest(toUnixSocket: path)
        #expect(answer.hasPrefix("HTTP/1.1 200"), "the next bridge answered: \(answer.prefix(80))")
        await bridge.shutdown()
        await serving.value
        await client.shutdown()
    }

    /// A bridge bound and shut down without ever running (a daemon that fails to start its
    /// next section) ends its listener and the connection it accepted, and `run()` called
    /// after that returns at once.
    @Test func aBridgeShutDownBeforeRunningClosesWhatItAccepted() async throws {
        let directory = try TemporaryDirectory("shutdown-unrun")
        defer { directory.remove() }
        let path = directory.path("accessory.sock")
        let client = AccessoryClient(
            transport: EmulatedAccessory().socketPairTransport(on: MultiThreadedEventLoopGroup.singleton)
        )
        let bridge = AccessoryBridge(client: client)
        _ = try await bridge.bind([.unix(path: path)])
        let descriptor = try #require(Connector.connect(path), "cannot connect to the bridge's socket")
        defer { close(descriptor) }
        try await Task.sleep(for: .milliseconds(100))  // NIO accepts and wraps the connection
        await bridge.shutdown()
        #expect(Self.endsWithin(.seconds(2), descriptor), "the accepted connection was left open")
        #expect(access(path, F_OK) != 0, "the socket file is still there")
        let started = ContinuousClock.now
        await bridge.run()
        #expect(started.duration(to: .now) < .seconds(1))
        await client.shutdown()
    }

    /// Whether the peer closes `descriptor` (a read sees the end, or a reset) within `bound`.
    static func endsWithin(_ bound: Duration, _ descriptor: Int32) -> Bool {
        let deadline = ContinuousClock.now + bound
        var byte: UInt8 = 0
        while ContinuousClock.now < deadline {
            var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 50) >= 0 else { return false }
            guard entry.revents != 0 else { continue }
            let count = recv(descriptor, &byte, 1, Int32(MSG_DONTWAIT))
            if count == 0 || (count < 0 && errno != EAGAIN) { return true }
        }
        return false
    }

    /// `GET` of the bridge's status document over a fresh connection; the whole answer, or
    /// what went wrong. The blocking calls run on a thread of their own: on the cooperative
    /// pool (two threads here) two of them at once, in tests that run side by side, left no
    /// thread for the bridges' tasks, and every bridge test of the run stalled for their 10 s.
    static func statusRequest(toUnixSocket path: String) async -> String {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: Self.blockingStatusRequest(toUnixSocket: path)) }.start()
        }
    }

    private static func blockingStatusRequest(toUnixSocket path: String) -> String {
        guard let descriptor = Connector.connect(path) else {
            return "cannot connect: \(String(cString: strerror(errno)))"
        }
        defer { close(descriptor) }
        let request = "GET /.well-known/accessory-http/status HTTP/1.1\r\nHost: accessory\r\nConnection: close\r\n\r\n"
        guard request.withCString({ send(descriptor, $0, strlen($0), 0) }) == request.utf8.count else {
            return "cannot send the request"
        }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 100) >= 0 else { break }
            guard entry.revents != 0 else { continue }
            let count = recv(descriptor, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            answer += buffer[..<count]
        }
        return String(decoding: answer, as: UTF8.self)
    }
}

/// Connects to a unix socket over and over on a thread of its own (not the test's cooperative
/// pool, which a blocking loop would starve on 2 cores), keeping every connection made.
private final class Connector: Sendable {
    let path: String
    private let stopping = Atomic<Bool>(false)
    private let descriptors = Mutex<[Int32]>([])
    private let finished = DispatchSemaphore(value: 0)

    init(path: String) { self.path = path }

    func start() {
        Thread.detachNewThread {
            // Up to 200 connections, one each 50 µs or so: they go on arriving through the
            // shutdown, and stay far from the fd limit.
            while !self.stopping.load(ordering: .relaxed), self.descriptors.withLock({ $0.count }) < 200 {
                if let descriptor = Self.connect(self.path) {
                    self.descriptors.withLock { $0.append(descriptor) }
                }
                usleep(50)
            }
            self.finished.signal()
        }
    }

    /// Stops connecting; the connections made, for the caller to close.
    func stop() -> [Int32] {
        self.stopping.store(true, ordering: .relaxed)
        self.finished.wait()
        return self.descriptors.withLock { $0 }
    }

    static func connect(_ path: String) -> Int32? {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            close(descriptor)
            return nil
        }
        return descriptor
    }
}
