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

    init() throws { self.certificates = try Certificates.get() }

    /// One end of a socketpair, opened as a channel on each `open` (a `dup`, so the line itself
    /// stays as it is across opens); counts its opens.
    struct LineEnd: ByteStreamTransport {
        let descriptor: CInt
        var description: String { "line-end" }

        func open(
            on eventLoop: any EventLoop,
            configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
        ) async throws -> OpenedByteStream {
            let copy = dup(self.descriptor)
            guard copy >= 0 else { throw TransportError(.openFailed, "dup: \(String(cString: strerror(errno)))") }
            let channel = try await NIOPipeBootstrap(group: eventLoop)
                .channelOption(.allowRemoteHalfClosure, value: true)
                .channelInitializer(configure)
                .takingOwnershipOfDescriptor(inputOutput: copy)
                .get()
            return OpenedByteStream(channel: channel)
        }
    }

    /// 8 times: a TLS download of 1 GB abandoned after its first megabyte, then `/status`
    /// answered over a new session and TLS connection on the line opened once.
    @Test func abandonedTLSDownloadsRenewInBand() async throws {
        let (host, device) = try SocketPairTransport.makeSocketPair()
        defer {
            close(host)
            close(device)
        }
        let server = try TLSServerContext(
            configuration: .server(
                identity: .pem(
                    certificateFile: self.certificates.path("server.pem"),
                    keyFile: self.certificates.path("server.key")
                )
            )
        )
        let responder = EmulatedAccessory().makeResponder()
        let serving = Task {
            try await responder.serve(transport: LineEnd(descriptor: device)) { channel in
                [try server.addHandler(to: channel)]
            }
        }
        defer { serving.cancel() }
        let trust = TLSTrust(useSystemRoots: false, anchorFiles: [self.certificates.path("ca.pem")], trustStore: nil)
        let client = AccessoryClient(
            transport: TLSTransport(
                wrapping: SessionTransport(wrapping: LineEnd(descriptor: host)),
                configuration: .client(serverName: "accessory.local", trust: trust)
            )
        )
        for attempt in 1...8 {
            let received = try await client.execute(try AccessoryRequest(url: "/bytes/1000000000")) { response in
                var count = 0
                for try await chunk in response.body {
                    count += chunk.readableBytes
                    if count >= 1 << 20 { break }
                }
                return count
            }
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
