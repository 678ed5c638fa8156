import HTTPTypes
import NIOCore
import Testing

@testable import AccessoryHTTP1

/// A device that closes a kept-alive link just as the next request goes out (an idle timeout of
/// its own) makes that request fail with no byte of an answer. An idempotent request is then
/// sent once more on a fresh link, as async-http-client and browsers do; anything else fails as
/// before, and so does a request on a fresh link or one that was partly answered.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct IdleCloseRetryTests {
    /// Answers one request, then reads the next and closes without a word.
    static let answerOnceThenCloseOnTheNext: [DeviceStep] = [
        .readRequest, .respond { Reply.ok("ok " + $0.path) },
        .readRequest, .close,
    ]

    @Test func anIdempotentRequestIsSentAgainOnAFreshLink() async throws {
        let device = ScriptedDevice { _ in Self.answerOnceThenCloseOnTheNext }
        try await withLink(device.transport) { (link) async throws in
            // 16 rounds: every second request meets a link the device has just closed.
            for round in 0..<16 {
                #expect(try await link.fetch("/a\(round)").body == "ok /a\(round)")
                #expect(try await link.fetch("/b\(round)").body == "ok /b\(round)")
            }
        }
        // Each link answered one request and dropped the next, which the following link answered:
        // 32 answered, 31 of them sent twice. (The last link's device may see the host close it
        // mid-wait for a third request: not checked.)
        #expect(device.connectionCount == 32)
        #expect(device.allRequests.count == 63)
    }

    @Test func aPostIsNotSentAgain() async throws {
        let device = ScriptedDevice([
            Self.answerOnceThenCloseOnTheNext, [.readRequest, .respond { Reply.ok($0.path) }],
        ])
        try await withLink(device.transport) { (link) async throws in
            #expect(try await link.fetch("/first").body == "ok /first")
            #expect(
                await linkErrorCode {
                    _ = try await link.fetch("/order", method: .post, body: .bytes(ByteBuffer(string: "x")))
                } == .linkClosed
            )
        }
        #expect(device.allRequests.filter { $0.path == "/order" }.count == 1, "sent once only")
    }

    @Test func aFreshLinkThatClosesIsNotRetried() async throws {
        let device = ScriptedDevice([[.readRequest, .close], [.readRequest, .respond { Reply.ok($0.path) }]])
        try await withLink(device.transport) { (link) async throws in
            #expect(await linkErrorCode { _ = try await link.fetch("/x") } == .linkClosed)
        }
        #expect(device.connectionCount == 1)
    }

    @Test func aPartlyAnsweredRequestIsNotRetried() async throws {
        let device = ScriptedDevice([
            [.readRequest, .respond { Reply.ok($0.path) }, .readRequest, .write("HTTP/1.1 200 OK\r\n"), .close],
            [.readRequest, .respond { Reply.ok($0.path) }],
        ])
        try await withLink(device.transport) { (link) async throws in
            #expect(try await link.fetch("/first").body == "/first")
            #expect(await linkErrorCode { _ = try await link.fetch("/second") } == .linkClosed)
        }
        #expect(device.connectionCount == 1)
    }
}
