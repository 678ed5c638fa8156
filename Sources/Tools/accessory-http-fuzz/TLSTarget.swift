import NIOCore
import NIOEmbedded

@testable import AccessoryTLS

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The TLS handler (our OpenSSL wrapper) fed arbitrary bytes as the peer's side of the
/// handshake: as a client (the host facing a device) and as a server (an accessory facing a
/// host; its certificate and key come from ACCESSORY_HTTP_FUZZ_CERT and _KEY, which scripts/fuzz
/// makes). Asserts that no handshake completes on bytes that are not a TLS peer's, that no
/// plaintext reaches the layer above, and that the line's end ends the handshake.
enum TLSTarget {
    /// Made once: an `SSL_CTX` per input would measure OpenSSL's set-up, not the handler.
    nonisolated(unsafe) private static var contexts: [TLSContext] = []

    static func prepare(server: Bool) {
        do {
            var configurations = [TLSConfiguration.client(serverName: "accessory")]
            if server {
                guard let cert = getenv("ACCESSORY_HTTP_FUZZ_CERT"), let key = getenv("ACCESSORY_HTTP_FUZZ_KEY") else {
                    FuzzCheck.exit(
                        "tls-server needs ACCESSORY_HTTP_FUZZ_CERT and ACCESSORY_HTTP_FUZZ_KEY (scripts/fuzz sets them)"
                    )
                }
                let identity = TLSIdentity.pem(certificateFile: String(cString: cert), keyFile: String(cString: key))
                configurations = [TLSConfiguration.server(identity: identity)]
            }
            contexts = try configurations.map { configuration throws(TLSError) in
                try TLSContext(configuration: configuration)
            }
        } catch {
            FuzzCheck.exit("the TLS context could not be made: \(error)")
        }
    }

    static func run(_ input: inout FuzzInput) {
        guard let context = self.contexts.first else { return }
        let channel = EmbeddedChannel()
        let loop = channel.embeddedEventLoop
        let plaintext = PlaintextCounter()
        let promise = loop.makePromise(of: TLSSessionInfo.self)
        do {
            let handler = TLSHandler(
                connection: try TLSConnection(context: context),
                configuration: context.configuration,
                handshakePromise: promise
            )
            try channel.pipeline.syncOperations.addHandlers([handler, plaintext])
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        } catch {
            FuzzCheck.require(false, "the embedded TLS channel could not be set up: \(error)")
        }
        var handshake: Result<TLSSessionInfo, any Error>?
        promise.futureResult.assumeIsolated().whenComplete { handshake = $0 }
        for read in input.reads() {
            _ = try? channel.writeInbound(read)
            loop.run()
            while (try? channel.readOutbound(as: ByteBuffer.self)) != nil {}
            if case .success = handshake { FuzzCheck.require(false, "a TLS handshake completed on fuzzed bytes") }
        }
        FuzzCheck.require(plaintext.bytes == 0, "\(plaintext.bytes) plaintext bytes reached the layer above")
        channel.pipeline.fireChannelInactive()
        loop.run()
        FuzzCheck.require(handshake != nil, "the handshake did not end when the line closed")
        _ = try? channel.finish()
    }
}

/// Counts what the TLS handler passes up.
private final class PlaintextCounter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    var bytes = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.bytes += self.unwrapInboundIn(data).readableBytes
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {}
}
