import NIOCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The fuzzer's bytes, consumed from the front: a few control bytes (options, where to split),
/// then data. Running out is never an error: every take returns what is left.
struct FuzzInput {
    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    var isEmpty: Bool { self.index >= self.bytes.count }
    var remaining: Int { self.bytes.count - self.index }

    /// One control byte (0 when the input has run out).
    mutating func byte() -> UInt8 {
        guard self.index < self.bytes.count else { return 0 }
        defer { self.index += 1 }
        return self.bytes[self.index]
    }

    /// Up to `count` bytes.
    mutating func take(_ count: Int) -> ArraySlice<UInt8> {
        let end = min(self.bytes.count, self.index + max(0, count))
        defer { self.index = end }
        return self.bytes[self.index..<end]
    }

    /// Everything that is left.
    mutating func rest() -> ArraySlice<UInt8> {
        self.take(self.remaining)
    }

    /// The rest cut into reads: each read's length comes from a control byte taken before it
    /// (1 … 256, or the whole rest for 0), so the fuzzer explores where reads end.
    mutating func reads() -> [ByteBuffer] {
        var reads: [ByteBuffer] = []
        while !self.isEmpty {
            let control = Int(self.byte())
            let piece = control == 0 ? self.rest() : self.take(control)
            if !piece.isEmpty { reads.append(ByteBuffer(bytes: piece)) }
        }
        return reads
    }

    /// The rest as text (invalid UTF-8 repaired, as a `String` from the wire would be).
    mutating func text() -> String {
        String(decoding: self.rest(), as: UTF8.self)
    }
}

/// A broken invariant: a fuzz finding. Prints what was expected and aborts, so that libFuzzer
/// saves the input as a crash.
enum FuzzCheck {
    static func require(_ condition: Bool, _ message: @autoclosure () -> String) {
        guard !condition else { return }
        self.printError("fuzz invariant broken: \(message())")
        abort()
    }

    static func exit(_ message: String) -> Never {
        self.printError("accessory-http-fuzz: \(message)")
        Glibc.exit(2)
    }

    /// Straight to descriptor 2 (the C `stderr` global is shared mutable state to Swift 6).
    private static func printError(_ text: String) {
        var line = text + "\n"
        line.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
    }
}
