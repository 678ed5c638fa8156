import AccessoryClient
import AccessoryHTTP1
import AccessoryResponder
import AccessorySession
import AccessoryTLS
import AccessoryTestSupport
import AccessoryTransport
import NIOCore
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

    /// A transport whose every open is a new socketpair served over TLS by `device`'s current
    /// responder.
    func transport(to device: RestartingDevice) throws -> SocketPairTransport {
        var configuration = TLSConfiguration.server(
            identity: .pem(
                certificateFile: self.certificates.path("server.pem"),
                keyFile: self.certificates.path("server.key")
            )
        )
        configuration.applicationProtocols = ["h2", "http/1.1"]
        let server = try TLSServerContext(configuration: configuration)
        return SocketPairTransport(name: "shutting-down TLS device") { descriptor in
            let responder = device.responderForNewLink()
            Task {
                try? await responder.serve(transport: SharedLineEnd(descriptor: descriptor)) { channel in
                    [try server.addHandler(to: channel)]
                }
                close(descriptor)  // the served copy is closed; this is the last one
                device.linkEnded()
            }
        }
    }

    /// 16 times: the shutdown begins while an 8 MiB download over TLS runs; the download ends
    /// whole (the same SHA-256 as before any shutdown), the serve call returns within 2 s, and
    /// the next request, to the next responder, is answered within 1 s. HTTP/1.1 and HTTP/2 (by
    /// ALPN), with TLS on the line and with TLS inside the session layer.
    @Test(arguments: [HTTPVersionChoice.http1, .http2], [false, true])
    func aTLSDownloadUnderWayEndsWholeAndTheNextIsAnswered(http: HTTPVersionChoice, session: Bool) async throws {
        let devices = RestartingDevice()
        let pair = try self.transport(to: devices)
        var tls = TLSConfiguration.client(
            serverName: "accessory.local",
            trust: TLSTrust(useSystemRoots: false, anchorFiles: [self.certificates.path("ca.pem")], trustStore: nil)
        )
        tls.applicationProtocols = http == .http2 ? ["h2"] : ["http/1.1"]
        let line: any ByteStreamTransport = session ? SessionTransport(wrapping: pair) : pair
        var configuration = AccessoryClient.Configuration()
        configuration.link.httpVersion = http.version
        let client = AccessoryClient(
            transport: TLSTransport(wrapping: line, configuration: tls),
            configuration: configuration
        )
        var failure: (any Error)?
        do throws(any Error) {
            let problems = try await devices.shutDownInTheMiddleOfDownloads(
                client,
                path: "/bytes/\(8 << 20)",
                rounds: 16
            )
            #expect(problems.isEmpty, "\(problems.joined(separator: "; "))")
        } catch {
            failure = error
        }
        await client.shutdown()
        if let failure { throw failure }
    }
}
