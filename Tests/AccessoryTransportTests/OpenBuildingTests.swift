import Glibc
import NIOCore
import NIOPosix
import Testing

@testable import AccessoryTransport

/// `open(on:building:)` hands back what the pipeline set-up built, with no slot at the call
/// site, and refuses a transport that skipped the set-up.
@Suite struct OpenBuildingTests {
    /// Opens a real socketpair but "forgets" to run `configure`.
    struct ForgetfulTransport: ByteStreamTransport {
        var description: String { "forgetful" }

        func open(
            on eventLoop: any EventLoop,
            configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
        ) async throws -> OpenedByteStream {
            try await SocketPairTransport(peer: { _ = close($0) }).open(on: eventLoop) { channel in
                channel.eventLoop.makeSucceededVoidFuture()
            }
        }
    }

    @Test func theBuiltValueComesBackWithTheStream() async throws {
        let transport = SocketPairTransport(peer: { _ = close($0) })
        let (stream, output) = try await transport.open(
            on: testEventLoop,
            building: { channel in channel.eventLoop.makeSucceededFuture("built on \(channel.eventLoop)") }
        )
        #expect(output.hasPrefix("built on "))
        stream.channel.close(promise: nil)
    }

    @Test func aTransportThatSkipsTheSetUpIsRefused() async throws {
        let error = await transportError {
            _ = try await ForgetfulTransport().open(
                on: testEventLoop,
                building: { channel in channel.eventLoop.makeSucceededFuture(1) }
            )
        }
        #expect(error?.code == .openFailed)
        #expect(error?.message.contains("without running the pipeline set-up") == true)
    }
}
