import AccessoryClient
import AccessoryResponder
import AccessoryTestSupport
import AccessoryTransport
import NIOCore
import Testing

/// A download the host gives up on (a cancelled task, a bridge client killed mid-answer) ends
/// on the accessory's side too: the responder's writer learns the host is gone and its link's
/// `serve` returns. Before, a socketpair link served through NIO's pipe channel could take the
/// write side's hang-up first and the read side's end as a half-close, then wait for room to
/// write for ever; through the bridge, 10 to 14 of 20 killed downloads left such a link (and
/// its task) behind. 16 tries: which side the kernel reports first is a matter of timing.
@Suite(.timeLimit(.minutes(1)))
struct AbandonedDownloadTests {
    /// How many of the endless bodies' writers have stopped, and how.
    final class WriterEnds: Sendable {
        private let ended = TrackedMutex<[String]>([])
        func record(_ how: String) { self.ended.withLock { $0.append(how) } }
        var count: Int { self.ended.withLock { $0.count } }
    }

    @Test func theAccessorysWriterStopsWhenTheHostAbandonsTheDownload() async throws {
        let ends = WriterEnds()
        let responder = HTTPResponder { request in
            if request.head.path == "/status" {
                return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "ok\n")))
            }
            return ResponderResponse(
                status: .ok,
                body: .stream(length: nil) { writer in
                    let block = ByteBuffer(repeating: 0x61, count: 64 * 1024)
                    do {
                        while true { try await writer.write(block) }
                    } catch {
                        ends.record("\(error)")
                        throw error
                    }
                }
            )
        }
        let transport = SocketPairTransport(name: "endless", opensIndependentStreams: true) { descriptor in
            Task { try? await responder.serve(descriptor: descriptor) }
        }
        let client = AccessoryClient(transport: transport)
        for round in 0..<16 {
            let started = AsyncStream<Void>.makeStream()
            let download = Task {
                try await client.execute(AccessoryRequest(path: "/endless")) { response in
                    var received = 0
                    for try await chunk in response.body {
                        received += chunk.readableBytes
                        if received >= 1 << 20 { break }
                    }
                    started.continuation.yield()
                    // The host keeps the link and stops reading, as a killed bridge client's
                    // exchange does until the bridge notices; then it is cancelled.
                    try await Task.sleep(for: .seconds(60))
                }
            }
            for await _ in started.stream { break }
            try await Task.sleep(for: .milliseconds(50))
            download.cancel()
            _ = await download.result
            let cancelled = ContinuousClock.now
            while ends.count <= round && ContinuousClock.now - cancelled < TimeBounds.scaled(.seconds(2)) {
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(
                ends.count == round + 1,
                "round \(round): the accessory was still writing \(ContinuousClock.now - cancelled) after the host gave up"
            )
            // The next request is answered.
            let (head, body) = try await client.data(AccessoryRequest(path: "/status", timeout: .seconds(5)))
            #expect(head.status == .ok && String(buffer: body) == "ok\n", "round \(round)")
        }
        await client.shutdown()
    }
}
