import AccessoryTestSupport
import AccessoryTransport
import Foundation
import HTTPTypes
import NIOCore
import Testing

@testable import AccessoryHTTP1

/// A link failure carries what the transport knows (an `exec:` device's exit status and
/// stderr), which waits up to half a second for the child to exit; a caller's deadline comes
/// first. Before 2026-12-06 a device that hung up just before the deadline held the call
/// that half second past it.
@Suite(.serialized)
struct DiagnosticsDeadlineTests {
    /// 4 tries. The device's first start answers one request, then reads the next request's
    /// line, closes its output without answering, and stays alive (deaf to SIGTERM, so that
    /// the link's close does not end it before the diagnostics' half second). That second call (a POST,
    /// which the link does not send again) fails as the link closed, within its 200 ms
    /// deadline; the next request on the same link (which starts the device again, a plain
    /// HTTP/1.1 device this time) is answered within 2 s.
    @Test func aDeviceThatHangsUpEndsTheCallWithinItsDeadline() async throws {
        for attempt in 0..<4 {
            let flag = FileManager.default.temporaryDirectory
                .appendingPathComponent("hang-up-\(UInt64.random(in: 0...UInt64.max))").path
            defer { try? FileManager.default.removeItem(atPath: flag) }
            let answerOnce =
                "cr=$(printf '\\r'); read -r line; while read -r field && [ \"$field\" != \"$cr\" ]; do :; done; "
                + "printf 'HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nok'"
            let command =
                "if [ -e '\(flag)' ]; then exec python3 '\(ConcurrentShutdownTests.stdioDevice)'; fi; "
                + "touch '\(flag)'; \(answerOnce); read -r line; trap '' TERM; exec >&-; exec sleep 5"
            let link = HTTPLink(transport: ChildProcessTransport(command: command), configuration: testConfiguration())
            let first = try await link.execute(
                HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/status"),
                deadline: .now + TimeBounds.scaled(.seconds(5))
            ) { try await $0.body.collect(upTo: 100) }
            #expect(String(buffer: first) == "ok", "try \(attempt)")

            let clock = ContinuousClock()
            let started = clock.now
            var failure: HTTPLinkError?
            do {
                _ = try await link.execute(
                    HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/upload"),
                    body: .bytes(ByteBuffer(string: "x")),
                    deadline: .now + .milliseconds(200)
                ) { try await $0.body.collect(upTo: 100) }
            } catch {
                failure = error as? HTTPLinkError
            }
            let elapsed = clock.now - started
            #expect(failure?.code == .linkClosed, "try \(attempt): \(String(describing: failure))")
            // Without the bound, 500 ms or more (the diagnostics' wait for the child).
            #expect(
                elapsed < .milliseconds(200) + TimeBounds.scaled(.milliseconds(200)),
                "try \(attempt): the call ended \(elapsed) after it began, for a 200 ms deadline"
            )

            let next = clock.now
            let status = try await link.execute(
                HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/status"),
                deadline: .now + TimeBounds.scaled(.seconds(2))
            ) { response in response.head.status.code }
            #expect(status == 200, "try \(attempt): the next request was answered \(status)")
            #expect(clock.now - next < TimeBounds.scaled(.seconds(2)), "try \(attempt)")
            await link.shutdown()
        }
    }
}
