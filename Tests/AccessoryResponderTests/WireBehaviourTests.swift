import AccessoryCrypto
import AccessoryEmulator
import AccessoryResponder
import Foundation
import HTTPTypes
import NIOCore
import Testing

/// Exact wire behaviour of the responder serving the emulator over a real socketpair.
@Suite(.timeLimit(.minutes(1)))
struct WireBehaviourTests {
    @Test func keepAliveServesThreeRequestsInOrderOnOneLink() async throws {
        try await LinkFixture.withLink { link in
            try await link.send("GET /status HTTP/1.1\r\nHost: accessory\r\n\r\n")
            let status = try await link.readResponse()
            #expect(status.status == 200)
            #expect(status.header("content-type") == "application/json")
            #expect(status.header("server") == "accessory-http")
            #expect(status.header("connection") == nil)
            let json = try JSONSerialization.jsonObject(with: Data(status.body)) as? [String: Any]
            #expect(json?["model"] as? String == "AH-EMU-1")
            #expect(json?["serialNumber"] as? String == "EMU0001")
            #expect(json?["uptimeSeconds"] is Int)

            // Two requests written back to back (pipelined) are answered in order.
            try await link.send(
                "GET /echo?n=2 HTTP/1.1\r\nHost: accessory\r\nX-Test: a\r\nX-Test: b\r\n\r\n"
                    + "PUT /echo HTTP/1.1\r\nHost: accessory\r\nContent-Length: 5\r\n\r\nhello"
            )
            let second = try await link.readResponse()
            let secondJSON = try JSONSerialization.jsonObject(with: Data(second.body)) as? [String: Any]
            #expect(secondJSON?["path"] as? String == "/echo?n=2")
            #expect((secondJSON?["headers"] as? [String: String])?["x-test"] == "a, b")
            #expect((secondJSON?["headers"] as? [String: String])?["host"] == "accessory")
            let third = try await link.readResponse()
            let thirdJSON = try JSONSerialization.jsonObject(with: Data(third.body)) as? [String: Any]
            #expect(thirdJSON?["method"] as? String == "PUT")
            #expect(thirdJSON?["body"] as? String == "hello")
            #expect(thirdJSON?["bodyBase64"] as? String == "aGVsbG8=")
            #expect(thirdJSON?["bodyLength"] as? Int == 5)
        }
    }

    @Test func connectionCloseFromClientClosesAfterTheResponse() async throws {
        try await LinkFixture.withLink { link in
            try await link.send("GET /status HTTP/1.1\r\nHost: accessory\r\nConnection: close\r\n\r\n")
            let response = try await link.readResponse()
            #expect(response.status == 200)
            #expect(response.header("connection") == "close")
            #expect(try await link.peerClosesWithoutData())
        }
    }

    @Test func headResponsesCarryHeadersButNoBody() async throws {
        try await LinkFixture.withLink { link in
            try await link.send("HEAD /bytes/1000 HTTP/1.1\r\nHost: accessory\r\n\r\n")
            let fixed = try await link.readResponse(bodyExpected: false)
            #expect(fixed.status == 200)
            #expect(fixed.header("content-length") == "1000")

            try await link.send("HEAD /stream/1000 HTTP/1.1\r\nHost: accessory\r\n\r\n")
            let streamed = try await link.readResponse(bodyExpected: false)
            #expect(streamed.status == 200)
            #expect(streamed.header("transfer-encoding") == "chunked")

            try await link.send("HEAD /status HTTP/1.1\r\nHost: accessory\r\n\r\n")
            let status = try await link.readResponse(bodyExpected: false)
            #expect(status.header("content-type") == "application/json")
            #expect(Int(status.header("content-length") ?? "") ?? 0 > 0)

            // Had any body byte (or a chunked terminator) been sent, this would not parse.
            try await link.send("GET /bytes/3 HTTP/1.1\r\nHost: accessory\r\n\r\n")
            let next = try await link.readResponse()
            #expect(next.body == EmulatedAccessory.patternBytes(offset: 0, count: 3))
        }
    }

    @Test func etagAnswersConditionalRequestsWith304() async throws {
        try await LinkFixture.withLink { link in
            try await link.send("GET /etag HTTP/1.1\r\nHost: accessory\r\n\r\n")
            let full = try await link.readResponse()
            #expect(full.status == 200)
            let etag = try #require(full.header("etag"))
            let lastModified = try #require(full.header("last-modified"))
            #expect(lastModified == "Wed, 01 Jan 2025 00:00:00 GMT")
            #expect(full.header("cache-control") == "max-age=60")

            for condition in [
                "If-None-Match: \(etag)", "If-None-Match: \"other\", W/\(etag)", "If-None-Match: *",
                "If-Modified-Since: \(lastModified)", "If-Modified-Since: Thu, 01 Jan 2026 00:00:00 GMT",
            ] {
                try await link.send("GET /etag HTTP/1.1\r\nHost: accessory\r\n\(condition)\r\n\r\n")
                let response = try await link.readResponse()
                #expect(response.status == 304, "\(condition)")
                #expect(response.header("etag") == etag)
                #expect(response.body.isEmpty)
            }
            for condition in ["If-None-Match: \"other\"", "If-Modified-Since: Tue, 31 Dec 2024 23:59:59 GMT"] {
                try await link.send("GET /etag HTTP/1.1\r\nHost: accessory\r\n\(condition)\r\n\r\n")
                #expect(try await link.readResponse().status == 200, "\(condition)")
            }
        }
    }

    @Test func streamIsChunkedAndMatchesThePattern() async throws {
        try await LinkFixture.withLink { link in
            let count = 200_000
            try await link.send("GET /stream/\(count) HTTP/1.1\r\nHost: accessory\r\n\r\n")
            let response = try await link.readResponse()
            #expect(response.status == 200)
            #expect(response.header("transfer-encoding") == "chunked")
            #expect(response.header("content-length") == nil)
            #expect(response.chunkCount >= 2)
            #expect(response.body == EmulatedAccessory.patternBytes(offset: 0, count: count))
        }
    }

    @Test func bytesHashMatchesThePattern() async throws {
        try await LinkFixture.withLink { link in
            let count = 3_000_017
            try await link.send("GET /bytes/\(count) HTTP/1.1\r\nHost: accessory\r\n\r\n")
            let response = try await link.readResponse()
            #expect(response.header("content-length") == "\(count)")
            #expect(response.header("content-type") == "application/octet-stream")
            let expected = Digest.hex(.sha256, of: EmulatedAccessory.patternBytes(offset: 0, count: count))
            #expect(Digest.hex(.sha256, of: response.body) == expected)
            // Blocks differ, so a repeated block would be caught.
            #expect(
                EmulatedAccessory.patternBytes(offset: 0, count: 16)
                    != EmulatedAccessory.patternBytes(offset: 65_536, count: 16)
            )

            try await link.send("GET /bytes/99999999999 HTTP/1.1\r\nHost: accessory\r\n\r\n")
            #expect(try await link.readResponse().status == 400)
        }
    }

    @Test func expectContinueGets100BeforeTheBodyIsRead() async throws {
        try await LinkFixture.withLink { link in
            try await link.send(
                "POST /upload HTTP/1.1\r\nHost: accessory\r\nContent-Length: 11\r\nExpect: 100-continue\r\n\r\n"
            )
            let interim = try await link.readResponse()
            #expect(interim.status == 100)
            try await link.send("hello world")
            let final = try await link.readResponse()
            #expect(final.status == 200)
            let json = try JSONSerialization.jsonObject(with: Data(final.body)) as? [String: Any]
            #expect(json?["length"] as? Int == 11)
            #expect(json?["sha256"] as? String == Digest.hex(.sha256, of: Array("hello world".utf8)))
        }
    }

    /// A graceful shutdown begins while an upload waits for `100 Continue`: the interim answer
    /// keeps the link open (no `Connection: close` on it, which would tell the host not to send
    /// the body), the final one says `Connection: close`, and the link then ends. (Until
    /// 2026-12-05 the interim answer said `Connection: close` too.)
    @Test func aShutdownDuringA100ContinueUploadClosesAfterTheFinalAnswer() async throws {
        let handlerStarted = AsyncStream<Void>.makeStream()
        let shutdownBegun = AsyncStream<Void>.makeStream()
        let responder = HTTPResponder { request in
            handlerStarted.continuation.yield()
            // The body is asked for (and 100 Continue written) only once the shutdown began.
            for await _ in shutdownBegun.stream { break }
            let body = try await request.body.collect(upTo: 1024)
            return ResponderResponse(status: .ok, body: .bytes(body))
        }
        try await LinkFixture.withLink(responder: responder) { link in
            try await link.send(
                "POST /echo HTTP/1.1\r\nHost: accessory\r\nContent-Length: 11\r\nExpect: 100-continue\r\n\r\n"
            )
            // The head must be read before the shutdown begins: a link that has read nothing yet
            // just closes. (A fixed 50 ms wait here lost that race under AddressSanitizer in CI.)
            for await _ in handlerStarted.stream { break }
            responder.shutdown.begin()
            // The quiesce event was queued on the link's event loop inside `begin()`, ahead of
            // anything the handler asks of the link from now on.
            shutdownBegun.continuation.yield()
            let interim = try await link.readResponse()
            #expect(interim.status == 100)
            #expect(interim.header("connection") == nil)
            try await link.send("hello world")
            let final = try await link.readResponse()
            #expect(final.status == 200)
            #expect(String(decoding: final.body, as: UTF8.self) == "hello world")
            #expect(final.header("connection") == "close")
            #expect(try await link.peerClosesWithoutData(), "the link ends after the final answer")
        }
    }

    @Test func anUploadWithoutDigestReportsItsLengthOnly() async throws {
        try await LinkFixture.withLink { link in
            try await link.send(
                "POST /upload?digest=none HTTP/1.1\r\nHost: accessory\r\nContent-Length: 11\r\n\r\nhello world"
            )
            let response = try await link.readResponse()
            #expect(response.status == 200)
            let json = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
            #expect(json?["length"] as? Int == 11)
            #expect(json?["sha256"] == nil)
        }
    }

    @Test func expectContinueWithoutReadingTheBodyClosesTheLink() async throws {
        try await LinkFixture.withLink { link in
            try await link.send(
                "POST /status HTTP/1.1\r\nHost: accessory\r\nContent-Length: 1000000\r\nExpect: 100-continue\r\n\r\n"
            )
            let response = try await link.readResponse()
            #expect(response.status == 405)
            #expect(response.header("allow") == "GET, HEAD")
            #expect(response.header("connection") == "close")
            #expect(try await link.peerClosesWithoutData())
        }
    }

    @Test func unreadSmallBodyIsDrainedAndTheLinkStaysUsable() async throws {
        try await LinkFixture.withLink { link in
            try await link.send("POST /status HTTP/1.1\r\nHost: accessory\r\nContent-Length: 10\r\n\r\n0123456789")
            let refused = try await link.readResponse()
            #expect(refused.status == 405)
            #expect(refused.header("connection") == nil)
            try await link.send("GET /status HTTP/1.1\r\nHost: accessory\r\n\r\n")
            #expect(try await link.readResponse().status == 200)
        }
    }

    @Test func chunkedRequestBodyIsStreamedToUpload() async throws {
        try await LinkFixture.withLink { link in
            try await link.send(
                "POST /upload HTTP/1.1\r\nHost: accessory\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + "5\r\nhello\r\n1;ext=1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: yes\r\n\r\n"
            )
            let response = try await link.readResponse()
            #expect(response.status == 200)
            let json = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
            #expect(json?["length"] as? Int == 11)
            #expect(json?["sha256"] as? String == Digest.hex(.sha256, of: Array("hello world".utf8)))
            try await link.send("GET /status HTTP/1.1\r\nHost: accessory\r\n\r\n")
            #expect(try await link.readResponse().status == 200)
        }
    }

    @Test func oversizedHeaderBlockGets431AndClose() async throws {
        var configuration = ResponderConfiguration()
        configuration.maxHeaderBlockSize = 8 * 1024
        try await LinkFixture.withLink(responder: EmulatedAccessory().makeResponder(configuration: configuration)) {
            link in
            let big = String(repeating: "a", count: 16 * 1024)
            try await link.send("GET /status HTTP/1.1\r\nHost: accessory\r\nX-Big: \(big)\r\n\r\n")
            let response = try await link.readResponse()
            #expect(response.status == 431)
            #expect(response.header("connection") == "close")
            #expect(try await link.peerClosesWithoutData())
        }
    }

    @Test func tooManyHeaderFieldsGet431AndClose() async throws {
        try await LinkFixture.withLink { link in
            let fields = (0..<200).map { "X-F\($0): v\r\n" }.joined()
            try await link.send("GET /status HTTP/1.1\r\nHost: accessory\r\n\(fields)\r\n")
            let response = try await link.readResponse()
            #expect(response.status == 431)
            #expect(try await link.peerClosesWithoutData())
        }
    }

    @Test func garbageRequestLineGets400AndClose() async throws {
        try await LinkFixture.withLink { link in
            try await link.send("THIS IS NOT HTTP\r\n\r\n")
            let response = try await link.readResponse()
            #expect(response.status == 400)
            #expect(response.header("connection") == "close")
            #expect(try await link.peerClosesWithoutData())
        }
    }

    /// RFC 9112 §3.2: an HTTP/1.1 request without Host gets 400 (the link is then closed, as
    /// for every malformed request); HTTP/1.0 may leave Host out.
    @Test func anHTTP11RequestWithoutHostGets400AndClose() async throws {
        try await LinkFixture.withLink { link in
            try await link.send("GET /status HTTP/1.0\r\n\r\n")
            #expect(try await link.readResponse().status == 200)
        }
        try await LinkFixture.withLink { link in
            try await link.send("GET /status HTTP/1.1\r\n\r\n")
            let response = try await link.readResponse()
            #expect(response.status == 400)
            #expect(String(decoding: response.body, as: UTF8.self).contains("Host"))
            #expect(response.header("connection") == "close")
            #expect(try await link.peerClosesWithoutData())
        }
    }

    @Test func malformedChunkedBodyGets400AndClose() async throws {
        try await LinkFixture.withLink { link in
            try await link.send("POST /upload HTTP/1.1\r\nHost: accessory\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
            let response = try await link.readResponse()
            #expect(response.status == 400)
            #expect(try await link.peerClosesWithoutData())
        }
    }

    @Test func unknownPathIs404AndWrongMethodIs405() async throws {
        try await LinkFixture.withLink { link in
            try await link.send("GET /nope HTTP/1.1\r\nHost: accessory\r\n\r\n")
            let missing = try await link.readResponse()
            #expect(missing.status == 404)
            #expect(missing.header("content-type") == "application/json")
            try await link.send("DELETE /upload HTTP/1.1\r\nHost: accessory\r\n\r\n")
            let wrong = try await link.readResponse()
            #expect(wrong.status == 405)
            #expect(wrong.header("allow") == "POST, PUT")
        }
    }

    @Test func redirectsPointDownTheChain() async throws {
        try await LinkFixture.withLink { link in
            try await link.send("GET /redirect/3 HTTP/1.1\r\nHost: accessory\r\n\r\n")
            let first = try await link.readResponse()
            #expect(first.status == 302)
            #expect(first.header("location") == "/redirect/2")
            try await link.send("GET /redirect/1 HTTP/1.1\r\nHost: accessory\r\n\r\n")
            #expect(try await link.readResponse().header("location") == "/status")
            try await link.send("GET /absolute-redirect/2 HTTP/1.1\r\nHost: dev.local:8080\r\n\r\n")
            #expect(try await link.readResponse().header("location") == "http://dev.local:8080/absolute-redirect/1")
            try await link.send(
                "POST /redirect-to?url=%2Fecho%3Fa%3D1&status=307 HTTP/1.1\r\nHost: accessory\r\nContent-Length: 0\r\n\r\n"
            )
            let to = try await link.readResponse()
            #expect(to.status == 307)
            #expect(to.header("location") == "/echo?a=1")
        }
    }

    @Test func delayWaitsThenAnswers() async throws {
        try await LinkFixture.withLink { link in
            let start = ContinuousClock.now
            try await link.send("GET /delay/0.2 HTTP/1.1\r\nHost: accessory\r\n\r\n")
            #expect(try await link.readResponse().status == 200)
            #expect(ContinuousClock.now - start >= .milliseconds(200))
            try await link.send("GET /delay/61 HTTP/1.1\r\nHost: accessory\r\n\r\n")
            #expect(try await link.readResponse().status == 400)
        }
    }
}
