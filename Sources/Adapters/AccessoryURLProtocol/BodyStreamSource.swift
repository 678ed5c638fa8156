import AccessoryHTTP1
import Foundation
import NIOCore
import Synchronization

/// Sends a request's `httpBodyStream` to the accessory in 64 KiB pieces.
///
/// `@unchecked Sendable` proof: the `InputStream` is owned by this object alone once the
/// protocol took it from its request (FoundationNetworking never reads the body stream of a
/// request served by a custom protocol). `claimed` (an atomic exchange) lets exactly one
/// producer run ever open and read it, so it is never used by two threads; a second run (a
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
        self.stream.open()
        defer { self.stream.close() }
        var sent = 0
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            try Task.checkCancellation()
            let count = chunk.withUnsafeMutableBufferPointer { pointer in
                pointer.baseAddress.map { self.stream.read($0, maxLength: pointer.count) } ?? -1
            }
            if count < 0 {
                throw AccessoryURLProtocolError(
                    .invalidRequest,
                    "reading the request's httpBodyStream failed: \(self.stream.streamError.map { "\($0)" } ?? "unknown error")"
                )
            }
            if count == 0 { break }
            if let length, sent + count > length {
                throw AccessoryURLProtocolError(
                    .invalidRequest,
                    "httpBodyStream is longer than its Content-Length \(length)"
                )
            }
            try await writer.write(ByteBuffer(bytes: chunk[0..<count]))
            sent += count
        }
        if let length, sent != length {
            throw AccessoryURLProtocolError(
                .invalidRequest,
                "httpBodyStream ended after \(sent) of its Content-Length \(length) bytes"
            )
        }
    }
}
