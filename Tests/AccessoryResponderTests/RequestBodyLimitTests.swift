import AccessoryEmulator
import AccessoryResponder
import Testing

/// `ResponderConfiguration.maxRequestBodySize` (`serve --max-request-body`): a body over the
/// limit is answered with 413 and the link closed; one within it reaches the handler, and the
/// link stays usable.
@Suite struct RequestBodyLimitTests {
    func responder(limit: Int) -> HTTPResponder {
        var configuration = ResponderConfiguration()
        configuration.maxRequestBodySize = limit
        return EmulatedAccessory().makeResponder(configuration: configuration)
    }

    @Test func aDeclaredLengthOverTheLimitIs413BeforeTheHandler() async throws {
        try await LinkFixture.withLink(responder: self.responder(limit: 100)) { link in
            // Within the limit: echoed, and the link stays open.
            try await link.send(
                "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n" + String(repeating: "x", count: 100)
            )
            let fine = try await link.readResponse()
            #expect(fine.status == 200)
            #expect(fine.bodyText.contains("\"bodyLength\":100"))
            // Over it: refused before a byte of the body is read, then the link closes.
            try await link.send("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 101\r\n\r\n")
            let refused = try await link.readResponse()
            #expect(refused.status == 413)
            #expect(refused.bodyText.contains("100 bytes"))
            #expect(try await link.peerClosesWithoutData())
        }
    }

    @Test func aChunkedBodyGrowingPastTheLimitIs413() async throws {
        try await LinkFixture.withLink(responder: self.responder(limit: 1000)) { link in
            let chunk = String(repeating: "y", count: 600)
            try await link.send(
                "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + "258\r\n\(chunk)\r\n258\r\n\(chunk)\r\n0\r\n\r\n"
            )
            let refused = try await link.readResponse()
            #expect(refused.status == 413)
            #expect(try await link.peerClosesWithoutData())
        }
    }
}
