import AccessoryHTTP1
import Foundation
import NIOCore
import Synchronization

/// Sends a request's `httpBodyStream` to the accessory in 64 KiB pieces, read on a thread of
/// their own (``InputStreamReader``: a quiet stream must not hold the task past its deadline).
///
/// `@unchecked Sendable` proof: the `InputStream` is owned by this object alone once the
/// protocol took it from its request (FoundationNetworking never reads the body stream of a
/// request served by a custom protocol). `claimed` (an atomic exchange) lets exactly one
/// producer run ever hand it to a reader, so it is never used by two threads; a second run (a
/// 307/308 redirect or an authentication retry re-sending the body) fails with
/// ``AccessoryURLProtocolError/Code/bodyStreamNotReplayable`` instead of sending nothing.
final class BodyStreamSource: @unchecked Sendable {
    private let stream: InputStream
    private let claimed = Atomic<Bool>(false)

    init(_ stream: InputStream) {
        self.stream = stream
    }

    func body(length: Int?) -> HTTPRequestBody {
        .stream(length: length) { writer in try await self.send(to: writer, length: length) }
    }

    private func send(to writer: RequestBodyWriter, length: Int?) async throws {
        guard !self.claimed.exchange(true, ordering: .acquiringAndReleasing) else {
            throw AccessoryURLProtocolError(
                .bodyStreamNotReplayable,
                "the request's httpBodyStream was already sent and cannot be read again for a redirect or authentication retry; use httpBody, or AccessoryClient with a replayable HTTPRequestBody.stream"
            )
        }
        let reader = try InputStreamReader(self.stream)
        defer { reader.stop() }
        var sent = 0
        while case .bytes(let piece) = try await reader.next() {
            if let length, sent + piece.readableBytes > length {
                throw AccessoryURLProtocolError(
                    .invalidRequest,
                    "httpBodyStream is longer than its Content-Length \(length)"
                )
            }
            sent += piece.readableBytes
            try await writer.write(piece)
        }
        if let length, sent != length {
            throw AccessoryURLProtocolError(
                .invalidRequest,
                "httpBodyStream ended after \(sent) of its Content-Length \(length) bytes"
            )
        }
    }
}
