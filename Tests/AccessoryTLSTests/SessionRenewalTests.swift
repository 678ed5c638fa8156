import AccessoryClient
import AccessoryEmulator
import AccessoryResponder
import AccessorySession
import AccessoryTLS
import AccessoryTestSupport
import AccessoryTransport
import Foundation
import NIOCore
import NIOPosix
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// TLS inside the session layer, in one host process: each abandoned response ends the session
/// and its TLS connection, and the next request starts a new session and a new TLS handshake on
/// the same open line (in band), never reopening it.
@Suite(.timeLimit(.minutes(2)))
struct SessionRenewalTLSTests {
    let certificates: Certificates

    init() async throws { self.certificates = try await Certificates.get() }

    /// 8 times: a TLS download of 1 GB abandoned after its first megabyte, then `/status`
    /// answered over a new session and TLS connection on the line opened once.
    @Test func abandonedTLSDownloadsRenewInBand() async throws {
        try await withTLSResponderOnASharedLine(self.certificates) { host, trust in
            let client = AccessoryClient(
                transport: TLSTransport(
                    wrapping: SessionTransport(wrapping: SharedLineEnd(descriptor: host)),
                    configuration: .client(serverName: "accessory.local", trust: trust)
                )
            )
            for attempt in 1...8 {
                let received = try await client.abandonLargeDownload()
                #expect(received >= 1 << 20, "attempt \(attempt)")
                let started = ContinuousClock.now
                let (head, body) = try await client.get("/status")
                #expect(head.status == .ok, "attempt \(attempt)")
                #expect(String(buffer: body).contains("AH-EMU-1"), "attempt \(attempt)")
                #expect(
                    ContinuousClock.now - started < TimeBounds.scaled(.seconds(1)),
                    "attempt \(attempt): \(ContinuousClock.now - started)"
                )
            }
            #expect(client.link.openCount == 1)
            #expect(client.link.renewalCount == 8)
            await client.shutdown()
        }
    }
}
