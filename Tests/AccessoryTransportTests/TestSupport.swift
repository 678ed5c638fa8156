import Glibc
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import AccessoryTransport

/// Everything a channel reads, for tests to inspect.
final class ReceivedBytes: Sendable {
    private let bytes = TrackedMutex<[UInt8]>([])

    func append(_ buffer: ByteBuffer) {
        self.bytes.withLock { $0.append(contentsOf: buffer.readableBytesView) }
    }

    var text: String { String(decoding: self.bytes.withLock { $0 }, as: UTF8.self) }

    /// A `configure` closure for `ByteStreamTransport.open` that collects into `self`.
    var configure: @Sendable (any Channel) -> EventLoopFuture<Void> {
        { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(Collector(into: self))
            }
        }
    }

    private final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let received: ReceivedBytes
        init(into received: ReceivedBytes) { self.received = received }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            self.received.append(Self.unwrapInboundIn(data))
        }
    }
}

/// Polls `condition` every 10 ms until it holds or `timeout` passes; returns whether it held.
func eventually(within timeout: Duration = .seconds(3), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}

/// Waits for `future` at most `timeout`; `nil` if it did not complete in time.
func value<Value: Sendable>(of future: EventLoopFuture<Value>, within timeout: Duration = .seconds(3)) async -> Value? {
    let box = TrackedMutex<Value?>(nil)
    future.whenSuccess { value in box.withLock { $0 = value } }
    _ = await eventually(within: timeout) { box.withLock { $0 != nil } }
    return box.withLock { $0 }
}

extension Channel {
    func writeText(_ text: String) async throws {
        try await self.writeAndFlush(ByteBuffer(string: text)).get()
    }
}

var testEventLoop: any EventLoop { MultiThreadedEventLoopGroup.singleton.next() }

/// A unique path under /tmp, short enough for a unix socket.
func temporaryPath(_ suffix: String) -> String {
    "/tmp/acc-\(getpid())-\(UInt32.random(in: 0...UInt32.max))\(suffix)"
}

/// Catches the `TransportError` that `body` throws.
func transportError(_ body: () async throws -> Void) async -> TransportError? {
    do {
        try await body()
        return nil
    } catch let error as TransportError {
        return error
    } catch {
        Issue.record("expected a TransportError, got \(error)")
        return nil
    }
}
