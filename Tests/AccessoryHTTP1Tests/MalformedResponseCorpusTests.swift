import HTTPTypes
import NIOCore
import Testing

@testable import AccessoryHTTP1

/// Every way a device can get a response wrong that the parser or the link's own checks catch,
/// each named for what it is (not "unknown (http_parser error)"), each ending the exchange with
/// a protocol error, and each followed by a request on the same link that gets its own answer.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct MalformedResponseCorpusTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let bytes: [UInt8]
        let code: HTTPLinkError.Code
        /// Words the message must hold.
        let words: String
        var testDescription: String { self.name }

        init(_ name: String, _ text: String, _ code: HTTPLinkError.Code, _ words: String) {
            self.init(name, Array(text.utf8), code, words)
        }

        init(_ name: String, _ bytes: [UInt8], _ code: HTTPLinkError.Code, _ words: String) {
            self.name = name
            self.bytes = bytes
            self.code = code
            self.words = words
        }
    }

    static let ok = "HTTP/1.1 200 OK\r\n"

    static let corpus: [Case] = [
        Case(
            "Content-Length and Transfer-Encoding",
            ok + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            .malformedResponse,
            "both Content-Length and Transfer-Encoding"
        ),
        Case(
            "two Content-Length values",
            ok + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
            .malformedResponse,
            "conflicting Content-Length"
        ),
        Case("a folded header line", ok + "X-A: a\r\n b\r\nContent-Length: 0\r\n\r\n", .malformedResponse, "folded"),
        Case("a NUL in a header", ok + "X-A: a\0b\r\nContent-Length: 0\r\n\r\n", .malformedResponse, "NUL"),
        Case("bare LF line endings", "HTTP/1.1 200 OK\nContent-Length: 0\n\n", .malformedResponse, "bare LF"),
        Case(
            "an invalid chunk size",
            ok + "Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
            .malformedResponse,
            "invalid chunk size"
        ),
        Case(
            "a chunk size that overflows",
            ok + "Transfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFF\r\nx\r\n",
            .malformedResponse,
            "chunk size"
        ),
        Case(
            "a storm of informational responses",
            String(repeating: "HTTP/1.1 103 Early Hints\r\n\r\n", count: 1000) + ok + "Content-Length: 0\r\n\r\n",
            .malformedResponse,
            "informational (1xx)"
        ),
        Case(
            "an unasked-for 101",
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n",
            .malformedResponse,
            "switched protocols (101)"
        ),
        Case(
            "Transfer-Encoding: chunked, identity",
            ok + "Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
            .malformedResponse,
            "Transfer-Encoding"
        ),
        Case(
            "Transfer-Encoding: gzip, chunked",
            ok + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            .malformedResponse,
            "Transfer-Encoding"
        ),
        Case(
            "Content-Length in the trailer section",
            ok + "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nContent-Length: 3\r\n\r\n",
            .malformedResponse,
            "content-length"
        ),
        // Found by the `response` fuzz target: status 000 was taken as final, and the start of
        // another answer in the same read went unnoticed.
        Case(
            "a status of 000 followed by bytes",
            "HTTP/1.1 000 OK\r\nContent-Length: 2\r\n\r\nokHTTP/3.1",
            .malformedResponse,
            "status code 0, outside 100-599"
        ),
        Case("a status of 600", "HTTP/1.1 600 X\r\nContent-Length: 0\r\n\r\n", .malformedResponse, "status code 600"),
        Case("a status of 2OO", "HTTP/1.1 2OO OK\r\nContent-Length: 0\r\n\r\n", .malformedResponse, "status line"),
        Case(
            "a 1 MiB status line",
            "HTTP/1.1 200 " + String(repeating: "O", count: 1 << 20) + "\r\nContent-Length: 0\r\n\r\n",
            .responseTooLarge,
            "status line is longer than"
        ),
        Case(
            "100,000 header fields",
            ok + String(repeating: "X: y\r\n", count: 100_000) + "Content-Length: 0\r\n\r\n",
            .responseTooLarge,
            "header size or count limit"
        ),
    ]

    @Test(arguments: Self.corpus)
    func eachIsNamedAndTheNextRequestIsAnswered(_ test: Case) async throws {
        let device = ScriptedDevice([
            [.readRequest, .write(test.bytes)],
            [.readRequest, .respond { Reply.ok("ok " + $0.path) }],
        ])
        try await withLink(device.transport) { (link) async throws in
            do {
                let fetched = try await link.fetch("/bad")
                Issue.record("\(test.name): answered \(fetched.status) instead of failing")
            } catch let error as HTTPLinkError {
                #expect(error.code == test.code, "\(test.name): \(error.code.rawValue): \(error.message)")
                #expect(error.message.contains(test.words), "\(test.name): \(error.message)")
            }
            #expect(try await link.fetch("/next").body == "ok /next", "\(test.name): the next request")
        }
    }

    /// A deliberate choice: a chunk extension, however long, is accepted and ignored (RFC 9112
    /// §7.1.1 lets a recipient ignore extensions; llhttp hands them over piecewise and nothing
    /// here keeps them, so their length costs no memory). The body and the link are fine.
    @Test func aHugeChunkExtensionIsIgnored() async throws {
        let device = ScriptedDevice([
            [
                .readRequest,
                .write(
                    Self.ok + "Transfer-Encoding: chunked\r\n\r\n5;" + String(repeating: "a", count: 100_000)
                        + "\r\nhello\r\n0\r\n\r\n"
                ),
                .readRequest, .respond { Reply.ok("ok " + $0.path) },
            ]
        ])
        try await withLink(device.transport) { (link) async throws in
            #expect(try await link.fetch("/extended").body == "hello")
            #expect(try await link.fetch("/next").body == "ok /next")
        }
    }

    /// Framing and connection fields in a chunked answer's trailer section (RFC 9110 §6.5.1 keeps
    /// them out): NIO's parser (llhttp) applies `Connection: close` or a `Transfer-Encoding`
    /// there to its keep-alive decision and drops every later byte, so a link kept for reuse
    /// would never see the next answer (found by the `response` fuzz target). The answer is
    /// whole and delivered, and the link is not reused: the next request goes out on a fresh
    /// connection and is answered, 16 rounds each.
    @Test(arguments: [
        "Transfer-Encoding: gzip", "Connection: close", "Transfer-Encoding: chunked",
        "connection: keep-alive", "X-Checksum: 1",
    ])
    func framingFieldsInTrailersEndTheLink(field: String) async throws {
        let answer = Self.ok + "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n" + field + "\r\n\r\n"
        let device = ScriptedDevice { _ in
            // Answers by path: a kept link carries every round, a fresh one whatever comes next.
            Array(
                repeating: .respond { $0.path == "/trailed" ? Array(answer.utf8) : Reply.ok("ok " + $0.path) },
                count: 32
            ).flatMap { [DeviceStep.readRequest, $0] }
        }
        try await withLink(device.transport) { (link) async throws in
            for round in 0..<16 {
                #expect(try await link.fetch("/trailed").body == "abc", "\(field), round \(round)")
                let clock = ContinuousClock()
                let start = clock.now
                #expect(try await link.fetch("/next").body == "ok /next", "\(field), round \(round)")
                #expect(clock.now - start < .seconds(1), "\(field), round \(round): the next answer was late")
            }
        }
    }
}
