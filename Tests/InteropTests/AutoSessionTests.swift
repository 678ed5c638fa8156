import AccessoryClient
import AccessoryEmulator
import AccessoryResponder
import AccessorySession
import AccessoryTestSupport
import AccessoryTransport
import Foundation
import Glibc
import NIOPosix
import Testing

/// `session=auto` (docs/framing.md, docs/cli.md): HELLO first, plain HTTP/1.1 when the device
/// does not answer it. How each kind of peer reacts to a HELLO, as found here: nginx answers
/// `400 Bad Request` and closes at once; Python's `http.server` waits for a line end that never
/// comes (the fallback bound decides); our responder answers it.
@Suite("session=auto against real peers", .serialized)
struct AutoSessionTests {
    @Test func nginxFallsBackAtOnce() async throws {
        try await NginxFixture.with { nginx in
            let auto = AutoSessionTransport(wrapping: UnixSocketTransport(path: nginx.socketPath))
            let client = AccessoryClient(transport: auto)
            let started = ContinuousClock.now
            let (head, body) = try await client.get("/status")
            #expect(head.status == .ok && body.text == #"{"model":"nginx","ok":true}"#)
            #expect(
                ContinuousClock.now - started < TimeBounds.scaled(.milliseconds(900)),
                "nginx closes on HELLO: no need to wait"
            )
            #expect(auto.speaksSessions == false)
            let (again, _) = try await client.get("/status")
            #expect(again.status == .ok)
            await client.shutdown()
        }
    }

    @Test func pythonHTTPServerFallsBackWithinTheBound() async throws {
        let directory = try TemporaryDirectory("auto")
        defer { directory.remove() }
        let port = UInt16.random(in: 20000...40000)
        let server = try Subprocess(
            ["/usr/bin/python3", "-m", "http.server", "\(port)", "--bind", "127.0.0.1", "--directory", directory.root],
            logPath: directory.path("http.log")
        )
        defer { server.stop() }
        let up = await waitUntil(timeout: .seconds(10)) { server.log.contains("Serving HTTP") || tcpAccepts(port) }
        try #require(up, "python3 -m http.server did not start: \(server.log)")
        try "hello\n".write(toFile: directory.path("hello.txt"), atomically: true, encoding: .utf8)
        let auto = AutoSessionTransport(
            wrapping: ChildProcessTransport(command: "socat - TCP:127.0.0.1:\(port)", opensIndependentStreams: true)
        )
        let client = AccessoryClient(transport: auto)
        let started = ContinuousClock.now
        let (head, body) = try await client.get("/hello.txt")
        let elapsed = ContinuousClock.now - started
        #expect(head.status == .ok && body.text == "hello\n")
        #expect(
            elapsed < AutoSessionTransport.fallbackBound + TimeBounds.scaled(.seconds(1)),
            "fell back after \(elapsed)"
        )
        #expect(auto.speaksSessions == false)
        await client.shutdown()
    }

    @Test func ourResponderSpeaksSessions() async throws {
        let auto = AutoSessionTransport(
            wrapping: EmulatedAccessory().socketPairTransport(on: MultiThreadedEventLoopGroup.singleton),
            // Under AddressSanitizer, beside the other suites, our responder once missed 1 s.
            fallbackAfter: TimeBounds.scaled(AutoSessionTransport.fallbackBound)
        )
        let client = AccessoryClient(transport: auto)
        let (head, _) = try await client.get("/status")
        #expect(head.status == .ok)
        #expect(auto.speaksSessions == true)
        await client.shutdown()
    }
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
func tcpAccepts(_ port: UInt16) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}
