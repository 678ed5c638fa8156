import AccessoryBridge
import AccessoryClient
import AccessoryEmulator
import AccessoryTestSupport
import Foundation
import Glibc
import NIOPosix
import Testing

/// `bind` calls that overlap on one bridge. A bind that fails undoes what it bound; before
/// 2026-12-06 it undid a range of the bridge's list taken when it began, which also held what
/// an overlapping bind had added meanwhile: that bind returned success and its listener was
/// closed and its socket file removed.
@Suite struct BridgeBindRaceTests {
    /// 32 tries: two binds at once, one of a single socket, the other of a socket and then one
    /// in a directory that does not exist (it fails). The first one's socket answers once the
    /// bridge runs; the second one's socket is gone.
    @Test func aFailingBindUndoesOnlyItsOwnListeners() async throws {
        let directory = try TemporaryDirectory("bind-race")
        defer { directory.remove() }
        let client = AccessoryClient(
            transport: EmulatedAccessory().socketPairTransport(on: MultiThreadedEventLoopGroup.singleton)
        )
        for attempt in 0..<32 {
            let kept = directory.path("kept-\(attempt).sock")
            let undone = directory.path("undone-\(attempt).sock")
            let bridge = AccessoryBridge(client: client)
            let missing = directory.path("missing/x.sock")
            let first = Task { try await bridge.bind([.unix(path: kept)]) }
            let second = Task { try await bridge.bind([.unix(path: undone), .unix(path: missing)]) }
            let firstResult = await first.result
            let secondResult = await second.result
            if case .failure(let error) = firstResult { Issue.record("try \(attempt): the good bind failed: \(error)") }
            if case .success = secondResult {
                Issue.record("try \(attempt): a bind into a missing directory succeeded")
            }
            let serving = Task { await bridge.run() }
            let answer = await BridgeShutdownRaceTests.statusRequest(toUnixSocket: kept)
            #expect(
                answer.hasPrefix("HTTP/1.1 200"),
                "try \(attempt): the kept listener answered: \(answer.prefix(80))"
            )
            #expect(access(undone, F_OK) != 0, "try \(attempt): the failed bind's socket file is still there")
            await bridge.shutdown()
            await serving.value
            #expect(access(kept, F_OK) != 0, "try \(attempt): the socket file outlived the shutdown")
        }
        await client.shutdown()
    }
}
