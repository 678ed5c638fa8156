import AccessoryEmulator
import ArgumentParser
import Glibc

/// The "physical limit" peers: child processes that move the same bytes as the HTTP
/// measurements over stdin/stdout, with no HTTP. They run as separate processes, like the
/// responder, so the limit and the HTTP runs have the same process layout.

/// `raw-source BYTES`: for every byte read from stdin, writes BYTES bytes of the emulator's
/// pattern to stdout in 256 KiB writes (the pattern is generated once, not per transfer).
struct RawSource: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "raw-source", shouldDisplay: false)
    @Argument var bytes: Int

    func run() throws {
        let block = EmulatedAccessory.patternBytes(offset: 0, count: RawLimits.blockSize)
        var go: UInt8 = 0
        while read(0, &go, 1) == 1 {
            var left = self.bytes
            try block.withUnsafeBytes { buffer in
                while left > 0 {
                    let size = min(left, buffer.count)
                    try Sys.writeAll(1, UnsafeRawBufferPointer(rebasing: buffer[0..<size]))
                    left -= size
                }
            }
        }
    }
}

/// `raw-pong REQUEST_LENGTH RESPONSE_FILE`: reads requests of exactly REQUEST_LENGTH bytes
/// from stdin and answers each with the bytes of RESPONSE_FILE, until stdin ends.
struct RawPong: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "raw-pong", shouldDisplay: false)
    @Argument var requestLength: Int
    @Argument var responseFile: String

    func run() throws {
        let response = Array(Sys.readFile(self.responseFile).utf8)
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        defer { scratch.deallocate() }
        while try Sys.drain(0, count: self.requestLength, scratch: scratch) == self.requestLength {
            try Sys.writeAll(1, response)
        }
    }
}

enum RawLimits {
    static let blockSize = 256 * 1024
}
