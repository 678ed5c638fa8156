import AccessoryClient
import AccessoryHTTP1
import AccessoryResponder
import AccessoryTestSupport
import AccessoryTransport
import HTTPTypes
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// `LinkConfiguration.decompressResponses` on an HTTP/2 link (it applied to HTTP/1.1 only, so a
/// URLSession route with `http=2` handed the app gzip bytes under a kept Content-Encoding): the
/// request asks for deflate and gzip, the body is decoded, the device's head is kept, a corrupt,
/// truncated or bomb body fails the call (and never passes as complete), bodiless answers are
/// not decoded, and the connection answers the next request each time.
@Suite("HTTP/2 decompression", .timeLimit(.minutes(1)))
struct HTTP2DecompressionTests {
    /// What the device sends for each path, and the Accept-Encoding of every request it saw.
    final class Device: Sendable {
        let acceptEncodings = Mutex<[String?]>([])

        func respond(_ request: ResponderRequest) -> ResponderResponse {
            self.acceptEncodings.withLock { $0.append(request.head.headerFields[.acceptEncoding]) }
            let gzip: HTTPFields = [.contentEncoding: "gzip"]
            var corrupt = CompressedSamples.gzipped
            corrupt[20] ^= 0xFF
            switch request.head.path {
            case "/gzip": return Self.bytes(CompressedSamples.gzipped, gzip)
            case "/deflate": return Self.bytes(CompressedSamples.deflated, [.contentEncoding: "deflate"])
            case "/corrupt": return Self.bytes(corrupt, gzip)
            case "/truncated": return Self.bytes(Array(CompressedSamples.gzipped.dropLast(12)), gzip)
            case "/bomb": return Self.bytes(CompressedSamples.bomb, gzip)
            case "/no-content": return ResponderResponse(status: .noContent, headerFields: gzip)
            case "/head": return Self.bytes(CompressedSamples.gzipped, gzip)
            default: return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "fine")))
            }
        }

        static func bytes(_ body: [UInt8], _ fields: HTTPFields) -> ResponderResponse {
            ResponderResponse(status: .ok, headerFields: fields, body: .bytes(ByteBuffer(bytes: body)))
        }
    }

    static func client(_ device: Device, ratio: Int = 1000) -> AccessoryClient {
        http2Client(of: HTTPResponder { device.respond($0) }, name: "compressing responder") { link in
            link.decompressResponses = true
            link.maxDecompressionRatio = ratio
        }
    }

    @Test func compressedBodiesAreDecodedAndTheHeadKept() async throws {
        let device = Device()
        let client = Self.client(device)
        for path in ["/gzip", "/deflate"] {
            let (head, body) = try await client.get(path)
            #expect(String(buffer: body) == CompressedSamples.text, "\(path)")
            #expect(head.headerFields[.contentEncoding] == String(path.dropFirst()), "the device's head is kept")
        }
        var own = AccessoryRequest(path: "/gzip")
        own.headerFields[.acceptEncoding] = "gzip"
        let (_, body) = try await client.data(own)
        #expect(String(buffer: body) == CompressedSamples.text, "decoded also when the request names its own")
        #expect(device.acceptEncodings.withLock { $0 } == ["deflate, gzip", "deflate, gzip", "gzip"])
        #expect(client.http2?.openCount == 1)
        await client.shutdown()
    }

    @Test func aBrokenBodyFailsTheCallAndTheNextIsAnswered() async throws {
        let client = Self.client(Device(), ratio: 100)
        let expected: [(String, HTTPLinkError.Code)] = [
            ("/corrupt", .malformedResponse), ("/truncated", .malformedResponse), ("/bomb", .responseTooLarge),
        ]
        for attempt in 1...16 {
            for (path, code) in expected {
                do {
                    let (_, body) = try await client.get(path)
                    Issue.record("attempt \(attempt): \(path) was delivered as a success (\(body.readableBytes) bytes)")
                } catch {
                    #expect(
                        (error.underlying as? HTTPLinkError)?.code == code,
                        "attempt \(attempt), \(path): \(String(reflecting: error.underlying))"
                    )
                }
                let (head, body) = try await client.get("/fine")
                #expect(head.status == .ok && String(buffer: body) == "fine", "attempt \(attempt)")
            }
        }
        #expect(client.http2?.openCount == 1)
        await client.shutdown()
    }

    @Test func bodilessAnswersWithAContentEncodingAreNotDecoded() async throws {
        let client = Self.client(Device())
        let (head, body) = try await client.data(AccessoryRequest(method: .head, path: "/head"))
        #expect(head.status == .ok && body.readableBytes == 0)
        let (noContent, _) = try await client.get("/no-content")
        #expect(noContent.status == .noContent)
        let (_, fine) = try await client.get("/fine")
        #expect(String(buffer: fine) == "fine")
        await client.shutdown()
    }
}
