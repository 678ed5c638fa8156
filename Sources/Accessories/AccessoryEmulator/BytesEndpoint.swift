import AccessoryResponder
import HTTPTypes
import NIOCore

/// `/bytes/N` (with `Content-Length`) and `/stream/N` (chunked): N bytes of the pattern of
/// ``EmulatedAccessory/patternByte(at:)``, generated block by block while they are sent, so even
/// gigabytes never sit in memory.
enum BytesEndpoint {
    /// The largest N accepted.
    static let maxCount = 8 << 30
    /// Blocks written together (256 KiB of 64 KiB blocks: one read's worth for the client).
    static let blocksPerWrite = 4

    static func respond(count text: String, chunked: Bool) -> ResponderResponse {
        guard let count = Int(text), count >= 0, count <= Self.maxCount else {
            return EmulatorResponses.error(.badRequest, "the byte count must be an integer from 0 to \(Self.maxCount)")
        }
        let blockSize = EmulatedAccessory.patternBlockSize
        return ResponderResponse(
            status: .ok,
            headerFields: [.contentType: "application/octet-stream"],
            body: .stream(length: chunked ? nil : count) { writer in
                // Up to four blocks per write leave in one flush: a quarter of the system calls.
                var offset = 0
                var blocks: [ByteBuffer] = []
                blocks.reserveCapacity(Self.blocksPerWrite)
                while offset < count {
                    try Task.checkCancellation()
                    blocks.removeAll(keepingCapacity: true)
                    while offset < count && blocks.count < Self.blocksPerWrite {
                        let size = min(blockSize, count - offset)
                        blocks.append(EmulatedAccessory.patternBuffer(offset: offset, count: size))
                        offset += size
                    }
                    try await writer.write(contentsOf: blocks)
                }
            }
        )
    }
}
