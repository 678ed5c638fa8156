import AccessoryClient
import AccessoryResponder
import HTTPTypes
import NIOCore
import Testing

/// HTTP/2 forbids connection-specific fields (RFC 9113 §8.2.2), and NIOHTTP2Handler resets a
/// stream whose head carries one. The responder leaves them out of an HTTP/2 answer: before
/// 2026-11-30 an answer to an upload it did not read (which on HTTP/1.1 carries `Connection:
/// close`) and a handler's own `Connection: close` got the stream reset (CANCEL), not answered.
@Suite(.timeLimit(.minutes(1)))
struct ConnectionFieldTests {
    @Test func aHandlersConnectionFieldsDoNotResetTheStream() async throws {
        let responder = HTTPResponder { _ in
            var fields = HTTPFields()
            fields[.connection] = "close"
            fields[.transferEncoding] = "chunked"
            if let keepAlive = HTTPField.Name("Keep-Alive") { fields[keepAlive] = "timeout=5" }
            return ResponderResponse(status: .ok, headerFields: fields, body: .bytes(ByteBuffer(string: "fine")))
        }
        let client = http2Client(of: responder, name: "connection-fields")
        var failure: (any Error)?
        do {
            for attempt in 1...4 {
                let (head, body) = try await client.get("/fine")
                #expect(head.status == .ok, "attempt \(attempt)")
                #expect(String(buffer: body) == "fine", "attempt \(attempt)")
                #expect(head.headerFields[.connection] == nil, "attempt \(attempt)")
                #expect(head.headerFields[.transferEncoding] == nil, "attempt \(attempt)")
            }
        } catch {
            failure = error
        }
        await client.shutdown()
        if let failure { throw failure }
    }
}
