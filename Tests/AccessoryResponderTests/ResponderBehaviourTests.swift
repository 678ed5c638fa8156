import AccessoryResponder
import AccessoryTransport
import Foundation
import HTTPTypes
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// Responder rules that do not depend on the emulator: failures, streaming, idle links.
@Suite(.timeLimit(.minutes(1)))
struct ResponderBehaviourTests {
    struct Boom: Error {}

    @Test func handlerThatThrowsGets500AndTheLinkStaysUsable() async throws {
        let responder = HTTPResponder { request in
            if request.head.path == "/fail" { throw Boom() }
            return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "ok")))
        }
        try await LinkFixture.withLink(responder: responder) { link in
            try await link.send("GET /fail HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try await link.readResponse().status == 500)
            try await link.send("GET /fine HTTP/1.1\r\nHost: a\r\n\r\n")
            let fine = try await link.readResponse()
            #expect(fine.status == 200)
            #expect(fine.bodyText == "ok")
        }
    }

    /// By default a handler runs on the link's event loop thread (no hop per request); a
    /// configuration for blocking handlers runs it off every event loop.
    @Test(arguments: [true, false])
    func handlerRunsWhereTheConfigurationSays(onEventLoop: Bool) async throws {
        var configuration = ResponderConfiguration()
        configuration.runsHandlersOnEventLoop = onEventLoop
        let responder = HTTPResponder(configuration: configuration) { _ in
            let onLoop = MultiThreadedEventLoopGroup.currentEventLoop != nil
            return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: onLoop ? "loop" : "pool")))
        }
        try await LinkFixture.withLink(responder: responder) { link in
            for _ in 0..<3 {
                try await link.send("GET /where HTTP/1.1\r\nHost: a\r\n\r\n")
                #expect(try await link.readResponse().bodyText == (onEventLoop ? "loop" : "pool"))
            }
        }
    }

    /// A handler that does not read its request body yet holds the peer back: the responder
    /// stops reading the link instead of buffering the body, on the event loop or off it.
    @Test(arguments: [true, false])
    func unreadRequestBodyHoldsThePeerBack(onEventLoop: Bool) async throws {
        let total = 32 * 1024 * 1024
        let written = Atomic<Int>(0)
        let writtenWhileWaiting = Atomic<Int>(-1)
        var configuration = ResponderConfiguration()
        configuration.runsHandlersOnEventLoop = onEventLoop
        let responder = HTTPResponder(configuration: configuration) { request in
            try await Task.sleep(for: .milliseconds(500))
            writtenWhileWaiting.store(written.load(ordering: .relaxed), ordering: .relaxed)
            var received = 0
            for try await part in request.body { received += part.readableBytes }
            return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "received \(received)")))
        }
        let (serverEnd, clientEnd) = try SocketPairTransport.makeSocketPair()
        let server = Task {
            try await responder.serve(descriptor: serverEnd)  // the default loop
        }
        // The peer: blocking writes on a thread of its own, so a full socket simply blocks it.
        let reply: String = await withCheckedContinuation { continuation in
            Thread {
                defer { close(clientEnd) }
                func send(_ bytes: [UInt8]) -> Bool {
                    var offset = 0
                    while offset < bytes.count {
                        let n = bytes[offset...].withUnsafeBytes { Glibc.write(clientEnd, $0.baseAddress, $0.count) }
                        guard n > 0 else { return false }
                        offset += n
                        written.add(n, ordering: .relaxed)
                    }
                    return true
                }
                let head = "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: \(total)\r\nConnection: close\r\n\r\n"
                let chunk = [UInt8](repeating: 0x75, count: 64 * 1024)
                var ok = send(Array(head.utf8))
                var left = total
                while ok && left > 0 {
                    ok = send(Array(chunk.prefix(left)))
                    left -= min(left, chunk.count)
                }
                var response: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let n = buffer.withUnsafeMutableBytes { Glibc.read(clientEnd, $0.baseAddress, $0.count) }
                    if n <= 0 { break }
                    response += buffer[0..<n]
                }
                continuation.resume(returning: String(decoding: response, as: UTF8.self))
            }.start()
        }
        #expect(await LinkFixture.finishes(server, within: .seconds(10)))
        let held = writtenWhileWaiting.load(ordering: .relaxed)
        #expect(held > 0)
        #expect(held < 8 * 1024 * 1024, "the peer wrote \(held) bytes while the handler was not reading")
        #expect(reply.hasPrefix("HTTP/1.1 200"))
        #expect(reply.contains("received \(total)"))
    }

    @Test func streamThatFailsBeforeWritingGets500() async throws {
        let responder = HTTPResponder { _ in
            ResponderResponse(status: .ok, body: .stream(length: nil) { _ in throw Boom() })
        }
        try await LinkFixture.withLink(responder: responder) { link in
            try await link.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try await link.readResponse().status == 500)
        }
    }

    @Test func streamThatFailsAfterTheHeadClosesTheLink() async throws {
        let responder = HTTPResponder { _ in
            ResponderResponse(
                status: .ok,
                body: .stream(length: 100) { writer in
                    try await writer.write(ByteBuffer(string: "partial"))
                    throw Boom()
                }
            )
        }
        try await LinkFixture.withLink(responder: responder) { link in
            try await link.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            // The head promised 100 bytes; only 7 come, then the link closes.
            await #expect(throws: RawLinkError.self) { try await link.readResponse() }
        }
    }

    @Test func streamShorterThanDeclaredClosesTheLink() async throws {
        let responder = HTTPResponder { _ in
            ResponderResponse(
                status: .ok,
                body: .stream(length: 10) { writer in
                    try await writer.write(ByteBuffer(string: "12345"))
                }
            )
        }
        try await LinkFixture.withLink(responder: responder) { link in
            try await link.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            await #expect(throws: RawLinkError.self) { try await link.readResponse() }
        }
    }

    @Test func writerRefusesBytesBeyondTheDeclaredLength() async throws {
        let responder = HTTPResponder { _ in
            ResponderResponse(
                status: .ok,
                body: .stream(length: 3) { writer in
                    try await writer.write(ByteBuffer(string: "abc"))
                    do {
                        try await writer.write(ByteBuffer(string: "d"))
                    } catch let error as ResponderError {
                        // Swallowed on purpose: the declared three bytes are complete.
                        precondition(error.code == .responseLengthMismatch)
                    }
                }
            )
        }
        try await LinkFixture.withLink(responder: responder) { link in
            try await link.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            let response = try await link.readResponse()
            #expect(response.bodyText == "abc")
            try await link.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try await link.readResponse().bodyText == "abc")
        }
    }

    /// Several buffers in one write: every byte in order, empty ones skipped (an empty chunk
    /// would end a chunked body), the declared length checked against their sum.
    @Test(arguments: [nil, 7] as [Int?])
    func writerTakesSeveralBuffersAtOnce(declaredLength: Int?) async throws {
        let responder = HTTPResponder { _ in
            ResponderResponse(
                status: .ok,
                body: .stream(length: declaredLength) { writer in
                    try await writer.write(contentsOf: [
                        ByteBuffer(string: "ab"), ByteBuffer(), ByteBuffer(string: "cd"),
                    ])
                    try await writer.write(contentsOf: [ByteBuffer(string: "efg")])
                    guard declaredLength != nil else { return }
                    do {
                        try await writer.write(contentsOf: [ByteBuffer(), ByteBuffer(string: "h")])
                        Issue.record("a write beyond the declared length was accepted")
                    } catch let error as ResponderError {
                        #expect(error.code == .responseLengthMismatch)
                    }
                }
            )
        }
        try await LinkFixture.withLink(responder: responder) { link in
            for _ in 0..<2 {
                try await link.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
                let response = try await link.readResponse()
                #expect(response.bodyText == "abcdefg")
                #expect(response.header("content-length") == declaredLength.map(String.init))
                #expect(response.header("transfer-encoding") == (declaredLength == nil ? "chunked" : nil))
            }
        }
    }

    @Test func noContentAndEmptyBodiesAreFramedCorrectly() async throws {
        let responder = HTTPResponder { request in
            switch request.head.path {
            case "/204": return ResponderResponse(status: .noContent, body: .bytes(ByteBuffer(string: "ignored")))
            default: return ResponderResponse(status: .ok)
            }
        }
        try await LinkFixture.withLink(responder: responder) { link in
            try await link.send("GET /204 HTTP/1.1\r\nHost: a\r\n\r\n")
            let noContent = try await link.readResponse()
            #expect(noContent.status == 204)
            #expect(noContent.header("content-length") == nil)
            try await link.send("GET /empty HTTP/1.1\r\nHost: a\r\n\r\n")
            let empty = try await link.readResponse()
            #expect(empty.header("content-length") == "0")
        }
    }

    @Test func collectRefusesBodiesOverItsLimit() async throws {
        let responder = HTTPResponder { request in
            do {
                _ = try await request.body.collect(upTo: 4)
                return ResponderResponse(status: .ok)
            } catch let error as ResponderError where error.code == .bodyTooLarge {
                return ResponderResponse(status: .contentTooLarge)
            }
        }
        try await LinkFixture.withLink(responder: responder) { link in
            try await link.send("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n12345")
            #expect(try await link.readResponse().status == 413)
            try await link.send(
                "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n3\r\ncde\r\n0\r\n\r\n"
            )
            #expect(try await link.readResponse().status == 413)
            try await link.send("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\n1234")
            #expect(try await link.readResponse().status == 200)
        }
    }

    @Test func idleLinkIsClosedAfterTheTimeout() async throws {
        var configuration = ResponderConfiguration()
        configuration.idleTimeout = .seconds(2)
        let responder = HTTPResponder(configuration: configuration) { _ in ResponderResponse(status: .ok) }
        try await LinkFixture.withLink(responder: responder) { link in
            try await link.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try await link.readResponse().status == 200)
            let start = ContinuousClock.now
            #expect(try await link.peerClosesWithoutData())
            #expect(ContinuousClock.now - start >= .milliseconds(1500))
        }
    }

    @Test func http10RequestWithoutKeepAliveIsAnsweredThenClosed() async throws {
        let responder = HTTPResponder { _ in ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "hi"))) }
        try await LinkFixture.withLink(responder: responder) { link in
            try await link.send("GET / HTTP/1.0\r\n\r\n")
            let response = try await link.readResponse()
            #expect(response.bodyText == "hi")
            #expect(response.header("connection") == "close")
            #expect(try await link.peerClosesWithoutData())
        }
    }

    @Test func serveRefusesARegularFile() async throws {
        let path = "/tmp/accessory-responder-regular-\(UInt32.random(in: 0...UInt32.max))"
        let descriptor = open(path, O_CREAT | O_RDWR, 0o600)
        #expect(descriptor >= 0)
        defer { unlink(path) }
        let responder = HTTPResponder { _ in ResponderResponse(status: .ok) }
        await #expect(throws: ResponderError.self) {
            try await responder.serve(descriptor: descriptor, on: LinkFixture.group.next())
        }
    }
}
