import AccessoryEmulator
import AccessoryResponder
import AccessoryTransport
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// The responder and the emulator on the transport abstraction rather than a bare descriptor.
@Suite(.timeLimit(.minutes(1)))
struct TransportServingTests {
    /// Hands a value from a `@Sendable` closure back to the test.
    final class Handoff<Value: Sendable>: Sendable {
        private let value = TrackedMutex<Value?>(nil)
        func put(_ newValue: Value) { self.value.withLock { $0 = newValue } }
        func take() -> Value? {
            self.value.withLock { value in
                defer { value = nil }; return value
            }
        }
    }

    @Test func emulatorTransportServesEachOpenAsAFreshSession() async throws {
        let eventLoop = LinkFixture.group.next()
        let transport = EmulatedAccessory().socketPairTransport(on: LinkFixture.group)
        for _ in 0..<2 {
            let handoff = Handoff<RawLink.Channel>()
            let opened = try await transport.open(on: eventLoop) { channel in
                channel.eventLoop.makeCompletedFuture {
                    handoff.put(try RawLink.Channel(wrappingChannelSynchronously: channel))
                }
            }
            let client = try #require(handoff.take())
            #expect(opened.channel === client.channel)
            try await client.executeThenClose { inbound, outbound in
                let link = RawLink(channel: client.channel, inbound: inbound, outbound: outbound)
                defer { link.cancelWatchdog() }
                try await link.send("GET /status HTTP/1.1\r\nHost: accessory\r\n\r\n")
                #expect(try await link.readResponse().status == 200)
            }
        }
    }

    @Test func responderServesAnOpenedTransport() async throws {
        let eventLoop = LinkFixture.group.next()
        let peer = Handoff<CInt>()
        let transport = SocketPairTransport(name: "test") { descriptor in peer.put(descriptor) }
        let responder = EmulatedAccessory().makeResponder()
        let server = Task { try await responder.serve(transport: transport, on: eventLoop) }
        var descriptor: CInt? = nil
        for _ in 0..<500 where descriptor == nil {
            descriptor = peer.take()
            if descriptor == nil { try await Task.sleep(for: .milliseconds(10)) }
        }
        let clientEnd = try #require(descriptor, "the transport never handed out its peer end")
        let client = try await RawLink.connect(descriptor: clientEnd, on: eventLoop)
        try await client.executeThenClose { inbound, outbound in
            let link = RawLink(channel: client.channel, inbound: inbound, outbound: outbound)
            defer { link.cancelWatchdog() }
            try await link.send("GET /bytes/10 HTTP/1.1\r\nHost: accessory\r\n\r\n")
            #expect(try await link.readResponse().body == EmulatedAccessory.patternBytes(offset: 0, count: 10))
        }
        #expect(await LinkFixture.finishes(server, within: .seconds(10)))
    }
}
