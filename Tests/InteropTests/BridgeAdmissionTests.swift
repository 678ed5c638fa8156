import AccessoryClient
import AccessoryEmulator
import AccessoryTestSupport
import Glibc
import NIOPosix
import Testing

@testable import AccessoryBridge

/// The bridge's queue for the accessory's link (`BridgeAdmission`).
@Suite struct BridgeAdmissionTests {
    /// A waiter's timer that fires just as its turn comes gives up an id that is neither
    /// queued nor waiting to be: before 2026-12-06 it was kept as "abandoned" for good, one id
    /// per such race for the life of the bridge.
    @Test func aGiveUpAfterTheTurnCameLeavesNothingBehind() async throws {
        let admission = BridgeAdmission(limit: 1)
        #expect(await admission.acquire(timeout: .seconds(60)))
        let waiter = Task { await admission.acquire(timeout: .seconds(60)) }
        let clock = ContinuousClock()
        let started = clock.now
        while admission.load.queued == 0 && clock.now - started < .seconds(10) {
            try await Task.sleep(for: .milliseconds(1))
        }
        try #require(admission.load.queued == 1)
        admission.release()
        #expect(await waiter.value)
        admission.giveUp(1)  // the waiter's id: the first one handed out
        #expect(admission.abandonedCount == 0)
        admission.release()
        #expect(admission.load == (active: 0, queued: 0))
        // And the next request is admitted at once.
        #expect(await admission.acquire(timeout: .milliseconds(1)))
        admission.release()
    }

    /// A request that waits longer than its bound is turned away by then, and the next one
    /// after the turn is freed is admitted.
    @Test func aWaiterPastItsBoundIsTurnedAwayAndTheNextIsAdmitted() async {
        let admission = BridgeAdmission(limit: 1)
        #expect(await admission.acquire(timeout: .seconds(60)))
        let clock = ContinuousClock()
        let started = clock.now
        #expect(await !admission.acquire(timeout: .milliseconds(50)))
        #expect(clock.now - started < .seconds(5))
        #expect(admission.load == (active: 1, queued: 0))
        admission.release()
        #expect(await admission.acquire(timeout: .milliseconds(50)))
        admission.release()
        #expect(admission.abandonedCount == 0)
    }
}

/// `AccessoryBridge.bind` that fails part-way closes what it bound before the failure.
@Suite struct BridgePartialBindTests {
    /// A unix socket binds, then a TCP port that another socket holds does not: the unix
    /// listener is closed again and its file removed. Before 2026-12-06 it stayed bound, never
    /// served: a daemon that skipped this bridge on a reload kept a listener whose clients hung.
    @Test func aListenerThatCannotBindClosesTheOnesBoundBeforeIt() async throws {
        let directory = try TemporaryDirectory("partial-bind")
        defer { directory.remove() }
        let socketPath = directory.path("accessory.sock")
        // A TCP port held by a listening socket of this test.
        let holder = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(holder >= 0)
        defer { close(holder) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(holder, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(bound == 0 && listen(holder, 1) == 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(holder, $0, &length) }
        }
        let heldPort = Int(UInt16(bigEndian: address.sin_port))

        let client = AccessoryClient(
            transport: EmulatedAccessory().socketPairTransport(on: MultiThreadedEventLoopGroup.singleton)
        )
        let bridge = AccessoryBridge(client: client)
        await #expect(throws: BridgeError.self) {
            _ = try await bridge.bind([.unix(path: socketPath), .tcp(host: "127.0.0.1", port: heldPort)])
        }
        #expect(access(socketPath, F_OK) != 0, "the unix socket's file is still there")
        #expect(!Self.canConnect(toUnixSocket: socketPath), "the unix listener still accepts")
        // The bridge can still bind elsewhere (nothing of the failed call is left in its state).
        let retried = try await bridge.bind([.unix(path: socketPath)])
        #expect(retried.count == 1)
        let serving = Task { await bridge.run() }
        #expect(Self.canConnect(toUnixSocket: socketPath))
        await bridge.shutdown()
        await serving.value
        await client.shutdown()
    }

    static func canConnect(toUnixSocket path: String) -> Bool {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[index] = byte }
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
            }
        }
    }
}
