import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import AccessoryHTTP1

/// Bytes that follow a response's end in the same read: NIO's parser takes them as the start
/// of another response and keeps them, where the idle check never sees them, so the next
/// request would read them as its answer's start. The link is not reused instead (found by the
/// `response` fuzz target: a complete response followed by half a status line). A response that
/// ends exactly where the read ends keeps the link.
@Suite struct ResponseBoundaryTests {
    typealias Link = HTTPLinkHandlerEmbeddedTests.Link

    @Test(arguments: [
        ("Content-Length: 2\r\n\r\nok", "ok"),
        ("Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", "ok"),
        ("Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nTrailer: x\r\n\r\n", "ok"),
    ])
    func bytesAfterTheEndInTheSameReadEndTheLink(rest: String, body: String) throws {
        // Also behind informational heads in the same read (found by the `response` fuzz
        // target: a 1xx reset the guard's count of what the read had already passed).
        for informational in ["", "HTTP/1.1 100 Continue\r\n\r\n", "HTTP/1.1 103 Early\r\nX: y\r\n\r\n"] {
            let link = try Link()
            defer { link.finish() }
            let exchange = try link.start("/first")
            link.device(informational + "HTTP/1.1 200 OK\r\n" + rest + "HTTP/1.1 200 OK\r\n")
            #expect(link.claimedBody(exchange) == body, "the response itself is whole and delivered")
            #expect(completion(exchange) == false, "not reusable after \(informational.debugDescription)")
            #expect(!link.handler.isUsable)
        }
    }

    @Test(arguments: [
        ("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "GET"),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", "GET"),
        ("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "GET"),
        (
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
            "GET"
        ),
        ("HTTP/1.1 204 No Content\r\n\r\n", "GET"),
        ("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", "HEAD"),
    ])
    func aResponseThatEndsWithItsReadKeepsTheLink(response: String, method: String) throws {
        let link = try Link()
        defer { link.finish() }
        let exchange = try link.start("/first", method: HTTPMethod(rawValue: method))
        // Also in pieces: the end's last bytes may come in a read of their own.
        for piece in [response.dropLast(3), response.suffix(3)] { link.device(String(piece)) }
        #expect(completion(exchange) == true)
        #expect(link.handler.isUsable)
        let next = try link.start("/next")
        link.device("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext")
        #expect(link.claimedBody(next) == "next")
    }

    @Test func bytesAfterTheEndAreCaughtWhenTheEndSplitsAcrossReads() throws {
        let link = try Link()
        defer { link.finish() }
        let exchange = try link.start("/first")
        link.device("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab")
        link.device("cdHTTP/1.1")
        #expect(completion(exchange) == false)
    }

    /// A consumer whose body sequence went away before the head came never sees the head: its
    /// promise is failed when the exchange ends, not left open (NIO's debug builds trap on a
    /// promise that is never completed; found by the `response` fuzz target).
    @Test func aConsumerGoneBeforeTheHeadHasItsHeadFailed() throws {
        let link = try Link()
        defer { link.finish() }
        let exchange = try link.start("/gone", streamed: true)
        link.handler.consumerGone(id: exchange.id)
        link.device("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        #expect(completion(exchange) == true)
        var error: (any Error)?
        exchange.head.assumeIsolated().whenFailure { error = $0 }
        #expect((error as? HTTPLinkError)?.code == .cancelled)
    }

    private func completion(_ exchange: ExchangeHandle) -> Bool? {
        var value: Bool?
        exchange.completion.assumeIsolated().whenSuccess { value = $0 }
        return value
    }
}
