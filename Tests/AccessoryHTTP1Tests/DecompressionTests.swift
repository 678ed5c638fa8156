import HTTPTypes
import NIOCore
import Testing

@testable import AccessoryHTTP1

/// `LinkConfiguration.decompressResponses`: asks for gzip and deflate, decodes them (also when
/// the request named its own Accept-Encoding), keeps the device's head, refuses a bomb, and
/// leaves the link in step after a corrupt body.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct DecompressionTests {
    static let text = String(repeating: "hello, compressed world\n", count: 20)
    /// `gzip.compress(text, mtime=0)` (Python).
    static let gzipped: [UInt8] = [
        31, 139, 8, 0, 0, 0, 0, 0, 2, 3, 203, 72, 205, 201, 201, 215, 81, 72, 206, 207, 45, 40, 74, 45, 46, 78, 77,
        81, 40, 207, 47, 202, 73, 225, 202, 24, 21, 31, 22, 226, 0, 128, 98, 26, 148, 224, 1, 0, 0,
    ]
    /// `zlib.compress(text)`: what `Content-Encoding: deflate` means (RFC 9110 §8.4.1.2).
    static let deflated: [UInt8] = [
        120, 156, 203, 72, 205, 201, 201, 215, 81, 72, 206, 207, 45, 40, 74, 45, 46, 78, 77, 81, 40, 207, 47, 202,
        73, 225, 202, 24, 21, 31, 22, 226, 0, 124, 129, 178, 13,
    ]
    /// 100,000 zero bytes in 132: a ratio of 757.
    static let bomb: [UInt8] =
        [31, 139, 8, 0, 0, 0, 0, 0, 2, 3, 237, 193, 49, 1, 0, 0, 0, 194, 160, 245, 79, 109, 13, 15, 160]
        + [UInt8](repeating: 0, count: 97) + [128, 87, 3, 125, 149, 17, 212, 160, 134, 1, 0]

    static func compressed(_ body: [UInt8], encoding: String) -> [UInt8] {
        Array("HTTP/1.1 200 OK\r\nContent-Encoding: \(encoding)\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body
    }

    static var decompressing: LinkConfiguration {
        var configuration = testConfiguration()
        configuration.decompressResponses = true
        return configuration
    }

    @Test(arguments: [("gzip", gzipped), ("deflate", deflated)])
    func aCompressedBodyIsDecoded(encoding: String, body: [UInt8]) async throws {
        let device = ScriptedDevice([
            [
                .readRequest, .write(Self.compressed(body, encoding: encoding)),
                .readRequest, .respond { Reply.ok("ok " + $0.path) },
            ]
        ])
        try await withLink(device.transport, configuration: Self.decompressing) { (link) async throws in
            let fetched = try await link.fetch("/text")
            #expect(fetched.body == Self.text)
            #expect(fetched.head.headerFields[.contentEncoding] == encoding, "the device's head is kept")
            #expect(try await link.fetch("/next").body == "ok /next")
        }
        #expect(device.allRequests.first?.header("accept-encoding") == "deflate, gzip")
    }

    @Test func theRequestsOwnAcceptEncodingIsKeptAndTheBodyStillDecoded() async throws {
        let device = ScriptedDevice([[.readRequest, .write(Self.compressed(Self.gzipped, encoding: "gzip"))]])
        try await withLink(device.transport, configuration: Self.decompressing) { (link) async throws in
            let fetched = try await link.fetch("/text", headers: [.acceptEncoding: "gzip"])
            #expect(fetched.body == Self.text)
        }
        #expect(device.allRequests.first?.header("accept-encoding") == "gzip")
    }

    @Test func withoutTheOptionTheBytesAreAsSent() async throws {
        let device = ScriptedDevice([[.readRequest, .write(Self.compressed(Self.gzipped, encoding: "gzip"))]])
        try await withLink(device.transport, configuration: testConfiguration()) { (link) async throws in
            let fetched = try await link.fetch("/text")
            #expect(Array(fetched.body.utf8) != Array(Self.text.utf8))
            #expect(fetched.bodyBytes == Self.gzipped)
        }
        #expect(device.allRequests.first?.header("accept-encoding") == nil)
    }

    @Test func aCorruptBodyIsAMalformedResponseAndTheNextRequestIsAnswered() async throws {
        var corrupt = Self.gzipped
        corrupt[20] ^= 0xFF
        let device = ScriptedDevice([
            [.readRequest, .write(Self.compressed(corrupt, encoding: "gzip"))],
            [.readRequest, .respond { Reply.ok("ok " + $0.path) }],
        ])
        try await withLink(device.transport, configuration: Self.decompressing) { (link) async throws in
            #expect(await linkErrorCode { _ = try await link.fetch("/text") } == .malformedResponse)
            #expect(try await link.fetch("/next").body == "ok /next")
        }
    }

    /// Over the configured ratio (100 here; real text reaches 300, so the default is 1000).
    @Test func aDecompressionBombIsRefused() async throws {
        let device = ScriptedDevice([
            [.readRequest, .write(Self.compressed(Self.bomb, encoding: "gzip"))],
            [.readRequest, .respond { Reply.ok("ok " + $0.path) }],
        ])
        var configuration = Self.decompressing
        configuration.maxDecompressionRatio = 100
        try await withLink(device.transport, configuration: configuration) { (link) async throws in
            #expect(await linkErrorCode { _ = try await link.fetch("/zeros") } == .responseTooLarge)
            #expect(try await link.fetch("/next").body == "ok /next")
        }
    }

    /// HEAD, 204 and 304 answers carry Content-Encoding but no body: nothing to decode.
    @Test func bodilessAnswersWithAContentEncodingAreNotDecoded() async throws {
        let device = ScriptedDevice([
            [
                .readRequest,
                .write("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 49\r\n\r\n"),
                .readRequest,
                .write("HTTP/1.1 304 Not Modified\r\nContent-Encoding: gzip\r\nETag: \"x\"\r\n\r\n"),
                .readRequest,
                .write("HTTP/1.1 204 No Content\r\nContent-Encoding: gzip\r\n\r\n"),
                .readRequest, .respond { Reply.ok("ok " + $0.path) },
            ]
        ])
        try await withLink(device.transport, configuration: Self.decompressing) { (link) async throws in
            let head = try await link.fetch("/text", method: .head)
            #expect(head.status == 200)
            #expect(head.body == "")
            let notModified = try await link.fetch("/text", headers: [.ifNoneMatch: "\"x\""])
            #expect(notModified.status == 304)
            let noContent = try await link.fetch("/nothing")
            #expect(noContent.status == 204)
            #expect(try await link.fetch("/next").body == "ok /next")
            #expect(device.connectionCount == 1)
        }
    }
}
