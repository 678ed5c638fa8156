import AccessoryClient
import AccessoryCrypto
import AccessoryEmulator
import AccessoryHTTP1
import AccessoryResponder
import AccessorySession
import AccessoryTLS
import AccessoryTestSupport
import AccessoryTransport
import NIOCore
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A device's graceful shutdown (``HTTPResponder/shutdown``) when its links speak TLS: the
/// download under way still ends whole, through TLS's own close (close_notify) and, with the
/// session layer, TLS inside a session; the next request reaches the restarted device.
@Suite("Graceful shutdown of a TLS responder", .timeLimit(.minutes(3)))
struct GracefulShutdownTLSTests {
    let certificates: Certificates

    init() async throws { self.certificates = try await Certificates.get() }

    /// The responder serving the next open of the link over TLS, and how many serve calls
    /// returned.
    final class Devices: Sendable {
        let current = Mutex(EmulatedAccessory().makeResponder())
        let ended = Atomic<Int>(0)
        let server: TLSServerContext

        init(_ certificates: Certificates) throws {
            var configuration = TLSConfiguration.server(
                identity: .pem(
                    certificateFile: certificates.path("server.pem"),
                    keyFile: certificates.path("server.key")
                )
            )
            configuration.applicationProtocols = ["h2", "http/1.1"]
            self.server = try TLSServerContext(configuration: configuration)
        }

        /// Every open of the link is a new socketpair served over TLS by ``current``.
        var transport: SocketPairTransport {
            SocketPairTransport(name: "shutting-down TLS device") { descriptor in
                let responder = self.current.withLock { $0 }
                let server = self.server
                Task {
                    try? await responder.serve(transport: SharedLineEnd(descriptor: descriptor)) { channel in
                        [try server.addHandler(to: channel)]
                    }
                    close(descriptor)  // the served copy is closed; this is the last one
                    self.ended.add(1, ordering: .relaxed)
                }
            }
        }
    }

    /// 16 times: the shutdown begins while an 8 MiB download over TLS runs; the download ends
    /// whole (the same SHA-256 as before any shutdown), the serve call returns within 2 s, and
    /// the next request, to the next responder, is answered within 1 s. HTTP/1.1 and HTTP/2 (by
    /// ALPN), with TLS on the line and with TLS inside the session layer.
    @Test(arguments: [HTTPVersionChoice.http1, .http2], [false, true])
    func aTLSDownloadUnderWayEndsWholeAndTheNextIsAnswered(http: HTTPVersionChoice, session: Bool) async throws {
        let devices = try Devices(self.certificates)
        var tls = TLSConfiguration.client(
            serverName: "accessory.local",
            trust: TLSTrust(useSystemRoots: false, anchorFiles: [self.certificates.path("ca.pem")], trustStore: nil)
        )
        tls.applicationProtocols = http == .http2 ? ["h2"] : ["http/1.1"]
        let line: any ByteStreamTransport =
            session ? SessionTransport(wrapping: devices.transport) : devices.transport
        var configuration = AccessoryClient.Configuration()
        configuration.link.httpVersion = http.version
        let client = AccessoryClient(
            transport: TLSTransport(wrapping: line, configuration: tls),
            configuration: configuration
        )
        let path = "/bytes/\(8 << 20)"
        var failure: (any Error)?
        do throws(any Error) {
            let (_, whole) = try await client.get(path)
            let expected = Digest.hex(.sha256, of: whole.readableBytesView)
            for attempt in 1...16 {
                let responder = devices.current.withLock { $0 }
                let endedBefore = devices.ended.load(ordering: .relaxed)
                let body = try await client.execute(try AccessoryRequest(url: path)) { response in
                    var collected = ByteBuffer()
                    for try await var chunk in response.body {
                        collected.writeBuffer(&chunk)
                        if !responder.shutdown.hasBegun {
                            devices.current.withLock { $0 = EmulatedAccessory().makeResponder() }
                            responder.shutdown.begin()
                        }
                    }
                    return collected
                }
                let digest = Digest.hex(.sha256, of: body.readableBytesView)
                #expect(digest == expected, "attempt \(attempt): the download was not whole (\(body.readableBytes) B)")
                let clock = ContinuousClock()
                let shutDown = clock.now
                while devices.ended.load(ordering: .relaxed) == endedBefore,
                    clock.now - shutDown < TimeBounds.scaled(.seconds(2))
                {
                    try await Task.sleep(for: .milliseconds(10))
                }
                #expect(
                    devices.ended.load(ordering: .relaxed) > endedBefore,
                    "attempt \(attempt): the responder still serves \(clock.now - shutDown) after its answer ended"
                )
                let started = clock.now
                let (head, status) = try await client.get("/status")
                #expect(head.status == .ok && String(buffer: status).contains("model"), "attempt \(attempt)")
                #expect(
                    clock.now - started < TimeBounds.scaled(.seconds(1)),
                    "attempt \(attempt): the next took \(clock.now - started)"
                )
            }
        } catch {
            failure = error
        }
        await client.shutdown()
        if let failure { throw failure }
    }
}
