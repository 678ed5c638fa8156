import AccessoryTestSupport
import HTTPTypes
import NIOCore
import Testing

@testable import AccessoryHTTP1

/// `LinkConfiguration.decompressResponses`: asks for gzip and deflate, decodes them (also when
/// the request named its own Accept-Encoding), keeps the device's head, refuses a bomb, and
/// leaves the link in step after a corrupt body.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct DecompressionTests {
    static let text = CompressedSamples.text
    static let gzipped = CompressedSamples.gzipped
    static let deflated = CompressedSamples.deflated
    static let bomb = CompressedSamples.bomb

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
