import NIOCore

/// Cuts the bytes of one write from the layer above into DATA frames (docs/framing.md §2), as
/// buffers to write one after another.
///
/// Large payloads are not copied: the frames go out as the headers and CRCs, all in one small
/// buffer, interleaved with slices of the caller's payload, which the channel gathers into one
/// `writev`. Copying them into fresh frame buffers cost the bulk rate most of its speed (a new
/// ~64 KiB allocation per write, faulted in page by page). Small payloads are copied into one
/// buffer, where a copy is cheaper than more entries in the write queue.
struct DataFrameEncoder {
    /// Payloads shorter than this are copied into whole frames.
    static let copyBelow = 4096

    let nonce: UInt64
    /// The largest payload per frame (the peer's `max_frame` less the overhead).
    let maxPayload: Int

    /// The buffers to write, in order. `sequence` is the next frame's sequence number on entry,
    /// the one after the last frame's on return; `each` sees every frame (for tracing).
    func encode(
        _ bytes: ByteBuffer,
        sequence: inout UInt32,
        each: ((SessionFrame) -> Void)? = nil
    ) -> [ByteBuffer] {
        let chunk = max(1, self.maxPayload)
        let frameCount = max(1, (bytes.readableBytes + chunk - 1) / chunk)
        var remaining = bytes
        if bytes.readableBytes < Self.copyBelow {
            var out = ByteBuffer()
            out.reserveCapacity(bytes.readableBytes + frameCount * SessionFrame.overhead)
            repeat {
                let slice = remaining.readSlice(length: min(chunk, remaining.readableBytes)) ?? ByteBuffer()
                each?(SessionFrame(.data, nonce: self.nonce, sequence: sequence, payload: slice))
                SessionFrame.encode(.data, nonce: self.nonce, sequence: sequence, payload: slice, into: &out)
                sequence &+= 1
            } while remaining.readableBytes > 0
            return [out]
        }
        // Frame i's CRC and frame i+1's header are adjacent in `framing`, so each pair goes out
        // as one slice: header 0, payload 0, CRC 0 + header 1, payload 1, …, CRC n-1.
        var framing = ByteBuffer()
        framing.reserveCapacity(frameCount * SessionFrame.overhead)
        var payloads: [ByteBuffer] = []
        payloads.reserveCapacity(frameCount)
        for _ in 0..<frameCount {
            let slice = remaining.readSlice(length: min(chunk, remaining.readableBytes)) ?? ByteBuffer()
            each?(SessionFrame(.data, nonce: self.nonce, sequence: sequence, payload: slice))
            let headerCRC = SessionFrame.writeHeader(
                .data,
                nonce: self.nonce,
                sequence: sequence,
                length: slice.readableBytes,
                into: &framing
            )
            framing.writeInteger(SessionFrame.frameCRC(headerCRC: headerCRC, payload: slice))
            payloads.append(slice)
            sequence &+= 1
        }
        var buffers: [ByteBuffer] = []
        buffers.reserveCapacity(2 * frameCount + 1)
        let header = SessionFrame.headerSize
        buffers.append(framing.getSlice(at: framing.readerIndex, length: header) ?? ByteBuffer())
        for (index, payload) in payloads.enumerated() {
            buffers.append(payload)
            let from = framing.readerIndex + index * SessionFrame.overhead + header
            let length = index == frameCount - 1 ? 4 : SessionFrame.overhead
            buffers.append(framing.getSlice(at: from, length: length) ?? ByteBuffer())
        }
        return buffers
    }
}
