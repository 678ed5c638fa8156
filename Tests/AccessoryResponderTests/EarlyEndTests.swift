import AccessoryEmulator
import AccessoryResponder
import AccessoryTransport
import Glibc
import NIOPosix
import Testing

/// A stream that ends before its first byte (a USB host that reset the gadget while it
/// enumerated, a client that connected and left) ends `serve` at once: found in the USB VM test,
/// where serve-gadget waited forever on such a link and never served the next host.
@Suite struct EarlyEndTests {
    @Test(arguments: ["half-close", "close"])
    func serveReturnsWhenTheStreamEndsBeforeAnyByte(how: String) async throws {
        let (host, device) = try SocketPairTransport.makeSocketPair()
        let responder = EmulatedAccessory().makeResponder()
        let server = Task {
            try await responder.serve(descriptor: device, on: MultiThreadedEventLoopGroup.singleton.next())
        }
        if how == "half-close" {
            shutdown(host, CInt(SHUT_WR))
        } else {
            close(host)
        }
        let ended = Task {
            try? await server.value
            return true
        }
        let watchdog = Task {
            try? await Task.sleep(for: .seconds(3))
            server.cancel()
        }
        let started = ContinuousClock.now
        _ = await ended.value
        watchdog.cancel()
        #expect(
            ContinuousClock.now - started < .seconds(2),
            "serve waited \(ContinuousClock.now - started) on a stream that had ended"
        )
        if how == "half-close" { close(host) }
    }
}
