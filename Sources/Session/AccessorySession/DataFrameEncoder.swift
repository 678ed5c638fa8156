import AccessoryTransport
import NIOCore

/// Cuts the bytes of one write from the layer above into DATA frames (docs/framing.md §2), laid
/// out whole (header, payload, frame CRC) in buffers of ``bufferSize`` bytes at most.
///
/// Each payload is copied into its frame and its CRC computed over the copy, while it is still
/// in the CPU's cache: one pass over the bytes where the CRC alone was one before, and the
/// channel writes one buffer per eight frames of 16 KiB (more of a device's smaller frames).
/// (Frames as slices of the caller's payload between small header buffers cost two pipeline
/// writes and two `writev` entries a frame; copies into fresh buffers cost a new allocation,
/// faulted in page by page, per write. The buffers come from a ``ReusableBufferPool`` and are
/// written into again once the channel has let them go.)
struct DataFrameEncoder {
    /// The most bytes laid out in one buffer: eight frames of the largest size (a 64 KiB write
    /// is one buffer of five), or as many of a device's smaller frames as fit.
    static let bufferSize = 8 * SessionFrame.maxFrameSize
    /// A pool for the buffers of a session's frames: the newest six (768 KiB at most) are
    /// reused; writes of less than a frame's worth get buffers of their own size.
    static func makePool() -> ReusableBufferPool {
        ReusableBufferPool(lentLimit: 6, pooledCapacity: Self.bufferSize, smallestPooled: SessionFrame.maxFrameSize)
    }

    let nonce: UInt64
    /// The largest payload per frame (the peer's `max_frame` less the overhead).
    let maxPayload: Int

    /// The buffers to write, in order. `sequence` is the next frame's sequence number on entry,
    /// the one after the last frame's on return; `each` sees every frame (for tracing).
    func encode(
        _ bytes: ByteBuffer,
        sequence: inout UInt32,
        pool: inout ReusableBufferPool,
        each: ((SessionFrame) -> Void)? = nil
    ) -> [ByteBuffer] {
        let chunk = max(1, self.maxPayload)
        let framesPerBuffer = max(1, Self.bufferSize / (chunk + SessionFrame.overhead))
        var remaining = bytes
        var buffers: [ByteBuffer] = []
        repeat {
            let frames = min(framesPerBuffer, max(1, (remaining.readableBytes + chunk - 1) / chunk))
            let payloadBytes = min(remaining.readableBytes, frames * chunk)
            let size = payloadBytes + frames * SessionFrame.overhead
            buffers.append(
                pool.lend(capacity: size) { out in
                    for _ in 0..<frames {
                        let slice = remaining.readSlice(length: min(chunk, remaining.readableBytes)) ?? ByteBuffer()
                        each?(SessionFrame(.data, nonce: self.nonce, sequence: sequence, payload: slice))
                        let headerCRC = SessionFrame.writeHeader(
                            .data,
                            nonce: self.nonce,
                            sequence: sequence,
                            length: slice.readableBytes,
                            into: &out
                        )
                        let payloadAt = out.writerIndex - out.readerIndex
                        out.writeImmutableBuffer(slice)
                        let crc = out.withUnsafeReadableBytes {
                            CRC32C.update(headerCRC, UnsafeRawBufferPointer(rebasing: $0[payloadAt...]))
                        }
                        out.writeInteger(crc)
                        sequence &+= 1
                    }
                }
            )
        } while remaining.readableBytes > 0
        return buffers
    }
}
