import AccessoryEmulator
import AccessoryResponder
import AccessoryTransport
import NIOCore
import NIOPosix
import Testing

/// Runs `body` with a raw client on one end of a real socketpair while a responder serves the
/// other end, then checks that the responder finishes once the client has closed.
enum LinkFixture {
    static var group: any EventLoopGroup { MultiThreadedEventLoopGroup.singleton }

    static func withLink<Result>(
        responder: HTTPResponder = EmulatedAccessory().makeResponder(),
        _ body: (RawLink) async throws -> Result
    ) async throws -> Result {
        let (serverEnd, clientEnd) = try SocketPairTransport.makeSocketPair()
        let eventLoop = Self.group.next()
        let server = Task { try await responder.serve(descriptor: serverEnd, on: eventLoop) }
        let client: RawLink.Channel
        do {
            client = try await RawLink.connect(descriptor: clientEnd, on: eventLoop)
        } catch {
            server.cancel()
            throw error
        }
        let result: Result
        do {
            result = try await client.executeThenClose { inbound, outbound in
                let link = RawLink(channel: client.channel, inbound: inbound, outbound: outbound)
                defer { link.cancelWatchdog() }
                return try await body(link)
            }
        } catch {
            server.cancel()
            throw error
        }
        let finished = await Self.finishes(server, within: .seconds(10))
        #expect(finished, "the responder kept serving after the client closed its end")
        return result
    }

    /// Whether `task` finishes within `limit`; if not, it is cancelled (so this never hangs).
    static func finishes<Success: Sendable>(_ task: Task<Success, any Error>, within limit: Duration) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                _ = try? await task.value
                return true
            }
            group.addTask {
                do {
                    try await Task.sleep(for: limit)
                    task.cancel()
                } catch {}
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }
}
