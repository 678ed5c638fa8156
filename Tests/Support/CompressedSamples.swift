/// Compressed bodies for the decompression tests of both links (HTTP/1.1 and HTTP/2), made with
/// Python's `gzip` and `zlib`, so the decoder is checked against an independent encoder.
public enum CompressedSamples {
    public static let text = String(repeating: "hello, compressed world\n", count: 20)
    /// `gzip.compress(text, mtime=0)` (Python).
    public static let gzipped: [UInt8] = [
        31, 139, 8, 0, 0, 0, 0, 0, 2, 3, 203, 72, 205, 201, 201, 215, 81, 72, 206, 207, 45, 40, 74, 45, 46, 78, 77,
        81, 40, 207, 47, 202, 73, 225, 202, 24, 21, 31, 22, 226, 0, 128, 98, 26, 148, 224, 1, 0, 0,
    ]
    /// `zlib.compress(text)`: what `Content-Encoding: deflate` means (RFC 9110 §8.4.1.2).
    public static let deflated: [UInt8] = [
        120, 156, 203, 72, 205, 201, 201, 215, 81, 72, 206, 207, 45, 40, 74, 45, 46, 78, 77, 81, 40, 207, 47, 202,
        73, 225, 202, 24, 21, 31, 22, 226, 0, 124, 129, 178, 13,
    ]
    /// 100,000 zero bytes in 132: a ratio of 757.
    public static let bomb: [UInt8] =
        [31, 139, 8, 0, 0, 0, 0, 0, 2, 3, 237, 193, 49, 1, 0, 0, 0, 194, 160, 245, 79, 109, 13, 15, 160]
        + [UInt8](repeating: 0, count: 97) + [128, 87, 3, 125, 149, 17, 212, 160, 134, 1, 0]

}
