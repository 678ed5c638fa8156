import AccessoryClient
import AccessoryEmulator
import AccessoryHTTP1
import AccessorySession
import AccessoryTLS
import AccessoryTestSupport
import AccessoryTransport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A write timeout under TLS: the transport ending the stream shows to the TLS layer as a
/// connection cut without close_notify, which the link took for a malformed response before
/// 2026-12-07 (`tls-failed`, the CLI's exit 69, the reason lost). It is a write timeout, with
/// the transport's reason; and the next request is answered.
@Suite(.timeLimit(.minutes(2)))
struct WriteTimeoutTLSTests {
    let certificates: Certificates

    init() async throws { self.certificates = try await Certificates.get() }

    /// The exchange the transport ended fails as a write timeout with the transport's reason.
    static func expectWriteTimeout(_ exchange: () async throws -> Void) async {
        await #expect {
            try await exchange()
        } throws: { error in
            guard let error = error as? AccessoryClientError else { return false }
            return error.code == .timedOut && error.message == WatchdogTransport.reason
                && (error.underlying as? HTTPLinkError)?.code == .writeTimeout
        }
    }

    /// Through TLS on `transport`: a request the transport gives up on (once the handshake is
    /// done and the request is out; the device answers /delay/30 only after 30 s) fails as a
    /// write timeout, and the next one is answered.
    func timeOutThenAskAgain(_ transport: any ByteStreamTransport, trust: TLSTrust) async throws {
        let client = AccessoryClient(
            transport: TLSTransport(
                wrapping: transport,
                configuration: .client(serverName: "accessory.local", trust: trust)
            )
        )
        await Self.expectWriteTimeout { _ = try await client.get("/delay/30") }
        let started = ContinuousClock.now
        let (head, body) = try await client.get("/status")
        #expect(head.status == .ok)
        #expect(String(buffer: body).contains("AH-EMU-1"))
        #expect(ContinuousClock.now - started < TimeBounds.scaled(.seconds(2)), "\(ContinuousClock.now - started)")
        await client.shutdown()
    }

    /// TLS straight on the transport (a responder on a unix socket, each open a new connection).
    @Test func directlyOnTheTransport() async throws {
        try await withTLSResponder(self.certificates, applicationProtocols: ["http/1.1"]) { path in
            let trust = TLSTrust(
                useSystemRoots: false,
                anchorFiles: [self.certificates.path("ca.pem")],
                trustStore: nil
            )
            let watchdog = WatchdogTransport(
                inner: UnixSocketTransport(path: path),
                after: TimeBounds.scaled(.milliseconds(500))
            )
            try await self.timeOutThenAskAgain(watchdog, trust: trust)
        }
    }

    /// TLS inside a session, on a line shared across opens: the next request comes on a new
    /// session and TLS connection.
    @Test func insideASession() async throws {
        try await withTLSResponderOnASharedLine(self.certificates) { host, trust in
            let watchdog = WatchdogTransport(
                inner: SharedLineEnd(descriptor: host),
                after: TimeBounds.scaled(.milliseconds(500))
            )
            try await self.timeOutThenAskAgain(SessionTransport(wrapping: watchdog), trust: trust)
        }
    }
}
