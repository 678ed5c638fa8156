import AccessoryEmulator
import AccessoryResponder
import AccessoryURLProtocol
import Foundation
import FoundationNetworking
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The same emulator answers twice: over TCP through FoundationNetworking's own HTTP stack (the
/// reference), and through AccessoryURLProtocol. The request's and the configuration's timeouts
/// must combine the same way in both.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct TimeoutParityTests {
    /// The emulator on 127.0.0.1, one responder link per accepted connection.
    final class TCPEmulator: Sendable {
        let port: UInt16
        private let listener: CInt

        init() throws {
            let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard listener >= 0 else { throw FixtureError("socket failed") }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                    bind(listener, pointer, length) == 0 && listen(listener, 16) == 0
                        && getsockname(listener, pointer, &length) == 0
                }
            }
            guard bound else {
                close(listener)
                throw FixtureError("could not listen on 127.0.0.1")
            }
            self.listener = listener
            self.port = UInt16(bigEndian: address.sin_port)
            let responder = EmulatedAccessory().makeResponder()
            Thread {
                while true {
                    let connection = accept(listener, nil, nil)
                    guard connection >= 0 else { return }  // the listener was shut down
                    Task { try? await responder.serve(descriptor: connection) }
                }
            }.start()
        }

        func stop() {
            shutdown(self.listener, Int32(SHUT_RDWR))
            close(self.listener)
        }
    }

    /// Seconds until `path` failed with `URLError.timedOut` (the test fails otherwise).
    func timedOut(_ session: URLSession, _ url: URL, requestTimeout: TimeInterval?) async -> Double {
        var request = URLRequest(url: url)
        if let requestTimeout { request.timeoutInterval = requestTimeout }
        let clock = ContinuousClock()
        let start = clock.now
        do {
            _ = try await session.data(for: request)
            Issue.record("\(url) answered; expected a timeout")
        } catch {
            #expect((error as? URLError)?.code == .timedOut, "\(url): \(error)")
        }
        let elapsed = start.duration(to: clock.now)
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// (configuration's timeoutIntervalForRequest, the request's timeoutInterval or nil).
    @Test(arguments: [(1.0, 2.0), (3.0, 1.0), (1.0, nil)] as [(Double, Double?)])
    func theRequestAndTheConfigurationCombineAsInTheBuiltInStack(configured: Double, requested: Double?) async throws {
        let tcp = try TCPEmulator()
        defer { tcp.stop() }
        let builtInConfiguration = URLSessionConfiguration.ephemeral
        builtInConfiguration.timeoutIntervalForRequest = configured
        let builtIn = URLSession(configuration: builtInConfiguration)
        defer { builtIn.finishTasksAndInvalidate() }
        let ours = Fixture.session { $0.timeoutIntervalForRequest = configured }
        defer { ours.finishTasksAndInvalidate() }

        let reference = await timedOut(
            builtIn,
            try Fixture.url("http://127.0.0.1:\(tcp.port)/delay/10"),
            requestTimeout: requested
        )
        let measured = await timedOut(ours, try Fixture.url("accessory://emu1/delay/10"), requestTimeout: requested)
        let expected = requested ?? configured
        #expect(abs(reference - expected) < 0.6, "the built-in stack timed out after \(reference) s")
        #expect(abs(measured - reference) < 0.6, "built-in: \(reference) s, through the accessory link: \(measured) s")
    }
}
