import AccessoryClient
import AccessoryEmulator
import AccessoryResponder
import AccessorySession
import AccessoryTestSupport
import AccessoryTransport
import NIOCore
import NIOPosix
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A device whose HTTP/2 side never starts, or stops hearing (its line, and its session layer,
/// work on): before 2026-11-30 such a connection was never given up, and every request after the
/// first timed out on it too.
extension SessionIOSuites {
    @Suite("HTTP/2: a device whose HTTP/2 side is silent", .serialized)
    struct HTTP2SilentDeviceTests {
        /// Four hosts in turn, each finding the device's HTTP side deaf on its first connection
        /// (the device's line, and its session layer, work): the host's GET fails within the idle
        /// bound saying the device sent no SETTINGS; its next GET, once the device hears again,
        /// is answered within 1 s on a new connection: a new session in band over a shared
        /// socketpair, or a new connection of a unix socket without sessions.
        @Test(arguments: [true, false])
        func theNextRequestStartsANewConnection(session: Bool) async throws {
            let deaf = DeafSwitch()
            let device = try DeafDevice(deaf, sessions: session)
            defer { device.stop() }
            try await device.ready()
            for round in 1...4 {
                var configuration = AccessoryClient.Configuration()
                configuration.link.httpVersion = .http2
                configuration.link.idleTimeout = .milliseconds(500)
                let client = AccessoryClient(transport: device.transport, configuration: configuration)
                var failure: (any Error)?
                do {
                    deaf.on.store(true, ordering: .releasing)
                    let started = ContinuousClock.now
                    let error = await #expect(throws: (any Error).self, "round \(round)") {
                        _ = try await client.get("/status")
                    }
                    let failedAfter = ContinuousClock.now - started
                    let text = error.map { "\($0)" } ?? ""
                    #expect(text.contains("SETTINGS") && text.contains("http=1.1"), "round \(round): \(text)")
                    #expect(failedAfter < TimeBounds.scaled(.seconds(2)), "round \(round): \(failedAfter)")
                    deaf.on.store(false, ordering: .releasing)
                    let next = ContinuousClock.now
                    let (head, body) = try await client.get("/status")
                    let answeredAfter = ContinuousClock.now - next
                    #expect(head.status == .ok && String(buffer: body).contains("model"), "round \(round)")
                    #expect(answeredAfter < TimeBounds.scaled(.seconds(1)), "round \(round): \(answeredAfter)")
                    #expect(client.http2?.openCount == (session ? 1 : 2), "round \(round)")
                    #expect(client.http2?.renewalCount == (session ? 1 : 0), "round \(round)")
                } catch {
                    failure = error
                }
                await client.shutdown()
                if let failure { throw failure }
            }
        }

        /// Four times on one link: a GET is answered, then the device's HTTP side stops hearing
        /// on that connection for good (its line, and its session layer, work on); the next GET
        /// fails within the idle bound, and the one after is answered within 1 s on a new
        /// connection (a new session in band, or a new unix socket connection): sent at first on
        /// the deaf connection, it goes out again on the new one once a PING found the device's
        /// HTTP/2 side gone. Before
        /// 2026-11-30 that one timed out too, on the deaf connection, as every later one would.
        ///
        /// Both kinds of HTTP/2 link: frame-level streams, and the stream channels of a link that
        /// decodes compressed responses (URLSession's).
        @Test(arguments: [true, false], [false, true])
        func aDeviceThatFallsSilentIsLeftForANewConnection(session: Bool, decompress: Bool) async throws {
            let deaf = DeafSwitch()
            let device = try DeafDevice(deaf, sessions: session)
            defer { device.stop() }
            try await device.ready()
            var configuration = AccessoryClient.Configuration()
            configuration.link.httpVersion = .http2
            configuration.link.decompressResponses = decompress
            configuration.link.idleTimeout = .milliseconds(500)
            let client = AccessoryClient(transport: device.transport, configuration: configuration)
            var failure: (any Error)?
            do {
                for round in 1...4 {
                    let (first, _) = try await client.get("/status")
                    #expect(first.status == .ok, "round \(round)")
                    deaf.deafenStreams.store(true, ordering: .releasing)
                    let started = ContinuousClock.now
                    await #expect(throws: (any Error).self, "round \(round)") {
                        _ = try await client.get("/status")
                    }
                    let failedAfter = ContinuousClock.now - started
                    #expect(failedAfter < TimeBounds.scaled(.seconds(2)), "round \(round): \(failedAfter)")
                    deaf.deafenStreams.store(false, ordering: .releasing)
                    let next = ContinuousClock.now
                    let (head, body) = try await client.get("/status")
                    let answeredAfter = ContinuousClock.now - next
                    #expect(head.status == .ok && String(buffer: body).contains("model"), "round \(round)")
                    #expect(answeredAfter < TimeBounds.scaled(.seconds(1)), "round \(round): \(answeredAfter)")
                }
                #expect(client.http2?.openCount == (session ? 1 : 5))
                #expect(client.http2?.renewalCount == (session ? 4 : 0))
            } catch {
                failure = error
            }
            await client.shutdown()
            if let failure { throw failure }
        }
    }
}

/// The emulated accessory behind a deaf switch, served over a socketpair that every host shares
/// (each host a session of its own) or on a unix socket (each host a connection of its own).
/// The switch's state when a stream (a session, a connection) brings its first byte holds for
/// that stream.
final class DeafDevice: Sendable {
    let transport: any ByteStreamTransport
    private let server: Task<Void, any Error>
    private let descriptors: [CInt]
    private let socketPath: String?

    init(_ deaf: DeafSwitch, sessions: Bool) throws {
        let responder = EmulatedAccessory().makeResponder()
        if sessions {
            let (host, device) = try SocketPairTransport.makeSocketPair()
            self.descriptors = [host, device]
            self.socketPath = nil
            self.transport = SessionTransport(wrapping: SharedLineEnd(descriptor: host))
            self.server = Task {
                try await responder.serve(
                    transport: SharedLineEnd(descriptor: device),
                    streamLayer: { channel in
                        let handler = DeafWhileSwitched(deaf)
                        try channel.pipeline.syncOperations.addHandler(handler)
                        return [handler]
                    }
                )
            }
        } else {
            let path = "/tmp/deaf-device-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
            self.descriptors = []
            self.socketPath = path
            self.transport = UnixSocketTransport(path: path)
            self.server = Task {
                try await responder.serveUnixSocket(path: path) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(DeafWhileSwitched(deaf))
                    }
                }
            }
        }
    }

    /// Waits until the unix socket accepts connections (no wait for a socketpair).
    func ready() async throws {
        guard let path = self.socketPath else { return }
        let until = ContinuousClock.now + .seconds(10)
        while access(path, F_OK) != 0 && ContinuousClock.now < until { try await Task.sleep(for: .milliseconds(10)) }
    }

    func stop() {
        self.server.cancel()
        for descriptor in self.descriptors { close(descriptor) }
    }
}

/// Whether the device's HTTP side hears anything; read from the device's event loop.
final class DeafSwitch: Sendable {
    /// A stream whose first byte comes while this is on hears nothing.
    let on = Atomic<Bool>(false)
    /// A stream that reads while this is on hears nothing from then on.
    let deafenStreams = Atomic<Bool>(false)
}

/// A stream-layer handler of the device that drops every byte the host sends on its stream when
/// the switch was on as the stream's first byte came (the responder builds a stream's handlers
/// ahead, as the last one ends): the device's session layer goes on answering, its HTTP side
/// hears nothing.
final class DeafWhileSwitched: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    private let deafSwitch: DeafSwitch
    private var deaf: Bool?

    init(_ deafSwitch: DeafSwitch) { self.deafSwitch = deafSwitch }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if self.deaf == nil { self.deaf = self.deafSwitch.on.load(ordering: .acquiring) }
        if self.deafSwitch.deafenStreams.load(ordering: .acquiring) { self.deaf = true }
        guard self.deaf != true else { return }
        context.fireChannelRead(data)
    }
}
