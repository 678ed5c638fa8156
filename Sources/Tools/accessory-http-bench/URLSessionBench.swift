/// The URLSession measurements (bulk through `AccessoryURLProtocol` with delegate streaming,
/// and peak RSS of a 1 GiB download through it), kept apart from the rest so they can be wired
/// in once the adapter exists.
///
/// Until then they report "not available". To wire them, this needs from `AccessoryURLProtocol`:
/// a way to make a `URLSessionConfiguration` (or register the protocol class) that sends
/// `accessory://…` requests over a given `ByteStreamTransport` — here the same
/// `SocketPairTransport` to a child's `serve --device stdio` that ``Benchmarks/nativeClient(_:)``
/// uses — and a session delegate that counts `didReceive data` bytes (bulk) or writes them to a
/// file handle (memory, measured in a child process so its peak RSS is its own).
enum URLSessionBench {
    static let pending = "not available yet: AccessoryURLProtocol is not built in this tree"

    static func measure(_ bench: Benchmarks, into table: inout Table) {
        table.unavailable(Names.urlSessionBulk, "MiB/s", Self.pending)
    }

    static func memory(_ bench: Benchmarks, into table: inout Table) {
        table.unavailable(Names.urlSessionMemory, "MiB", Self.pending)
    }
}
