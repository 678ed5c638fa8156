import AccessoryClient
import AccessoryResponder
import AccessoryTestSupport
import AccessoryTransport
import Foundation
import HTTPTypes
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// A download the link decodes (`decompressResponses`) reports no total: the device's
/// Content-Length counts the compressed bytes, so with it the fraction went past 1 (9.8 here).
/// The file holds the decoded body, on HTTP/1.1 and HTTP/2 alike.
@Suite(.timeLimit(.minutes(1)))
struct CompressedDownloadTests {
    @Test(arguments: [LinkOptions.HTTPVersion.http1_1, .http2])
    func aDecodedDownloadHasNoTotalAndTheDecodedBytes(version: LinkOptions.HTTPVersion) async throws {
        let responder = HTTPResponder { _ in
            ResponderResponse(
                status: .ok,
                headerFields: [.contentEncoding: "gzip"],
                body: .bytes(ByteBuffer(bytes: CompressedSamples.gzipped))
            )
        }
        let group = MultiThreadedEventLoopGroup.singleton
        let transport = SocketPairTransport(name: "gzip responder") { descriptor in
            let eventLoop = group.next()
            Task { try? await responder.serve(descriptor: descriptor, on: eventLoop) }
        }
        var configuration = AccessoryClient.Configuration()
        configuration.link.httpVersion = version
        configuration.link.decompressResponses = true
        let client = AccessoryClient(transport: transport, configuration: configuration)
        let path = temporaryPath("decoded.txt")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reports = Mutex<[TransferProgress]>([])
        try await client.download(AccessoryRequest(path: "/text"), to: path) { report in
            reports.withLock { $0.append(report) }
        }
        let seen = reports.withLock { $0 }
        #expect(!seen.isEmpty)
        #expect(seen.allSatisfy { $0.totalBytes == nil && $0.fractionCompleted == nil }, "\(seen)")
        #expect(seen.last?.bytesTransferred == Int64(CompressedSamples.text.utf8.count))
        #expect(try String(contentsOfFile: path, encoding: .utf8) == CompressedSamples.text)
        await client.shutdown()
    }
}
