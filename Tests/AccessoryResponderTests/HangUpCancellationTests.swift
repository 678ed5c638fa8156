import AccessoryResponder
import AccessoryTestSupport
import AccessoryTransport
import Glibc
import NIOCore
import NIOPosix
import Testing

/// A host that hangs up a plain HTTP/1.1 link while its handler works (a process killed
/// mid-request, a USB host gone) wants no answer any more: the handler is cancelled then, `serve`
/// returns, and the next host is answered at once. A host that only ends its side of the stream
/// (a half-close after its request) still gets its answer.
@Suite("responder: a host that hangs up cancels its handler", .timeLimit(.minutes(1)))
struct HangUpCancellationTests {
    static func responder(_ probe: CancellationProbe, acceptsSessions: Bool = true) -> HTTPResponder {
        var configuration = ResponderConfiguration()
        configuration.acceptsSessions = acceptsSessions
        return HTTPResponder(configuration: configuration) { request in
            switch request.head.path {
            case "/wait":
                try await probe.wait(for: .seconds(20))
                return ResponderResponse(status: .ok)
            case "/short":
                try await probe.wait(for: .milliseconds(200))
                return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "done")))
            default:
                return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "fine")))
            }
        }
    }

    static func send(_ text: String, to descriptor: CInt) {
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        #expect(written == bytes.count)
    }

    /// With the session layer (the default) the hang-up ends the session's stream; without it
    /// (`acceptsSessions = false`, a TLS listener's connections) it ends the link alone.
    @Test(arguments: [true, false])
    func aHostThatHangsUpMidRequestCancelsItsHandler(acceptsSessions: Bool) async throws {
        let probe = CancellationProbe()
        let responder = Self.responder(probe, acceptsSessions: acceptsSessions)
        let clock = ContinuousClock()
        for attempt in 1...16 {
            let (host, device) = try SocketPairTransport.makeSocketPair()
            let server = Task { try await responder.serve(descriptor: device, on: LinkFixture.group.next()) }
            Self.send("GET /wait HTTP/1.1\r\nHost: accessory\r\n\r\n", to: host)
            let started = await probe.holds(within: TimeBounds.scaled(.seconds(2))) { $0.started == attempt }
            #expect(started, "attempt \(attempt): the handler did not start")
            close(host)
            let stopped = await probe.holds(within: TimeBounds.scaled(.milliseconds(500))) { $0.cancelled == attempt }
            #expect(stopped, "attempt \(attempt): \(probe.cancelled) of \(probe.started) abandoned handlers cancelled")
            let ended = await LinkFixture.finishes(server, within: TimeBounds.scaled(.seconds(1)))
            #expect(ended, "attempt \(attempt): serve did not return after the host hung up")

            let next = clock.now
            let response = try await LinkFixture.withLink(responder: responder) { link in
                try await link.send("GET /fine HTTP/1.1\r\nHost: accessory\r\n\r\n")
                return try await link.readResponse()
            }
            #expect(response.status == 200 && response.body == Array("fine".utf8), "attempt \(attempt)")
            #expect(
                clock.now - next < TimeBounds.scaled(.milliseconds(500)),
                "attempt \(attempt): the next took \(clock.now - next)"
            )
        }
    }

    @Test func aHostThatHalfClosesAfterItsRequestIsAnswered() async throws {
        let probe = CancellationProbe()
        let (host, device) = try SocketPairTransport.makeSocketPair()
        defer { close(host) }
        let server = Task { try await Self.responder(probe).serve(descriptor: device, on: LinkFixture.group.next()) }
        Self.send("GET /short HTTP/1.1\r\nHost: accessory\r\n\r\n", to: host)
        shutdown(host, CInt(SHUT_WR))
        let answer = await Task.detached { Self.readAll(host, within: 5_000) }.value
        #expect(answer.hasPrefix("HTTP/1.1 200"), "got: \(answer)")
        #expect(answer.hasSuffix("done"), "got: \(answer)")
        #expect(probe.cancelled == 0, "a half-close cancelled the handler")
        #expect(await LinkFixture.finishes(server, within: TimeBounds.scaled(.seconds(2))))
    }

    /// Everything `descriptor` gives until its end (or nothing more for `milliseconds`).
    private static func readAll(_ descriptor: CInt, within milliseconds: CInt) -> String {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, milliseconds) > 0 else { break }
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
