import Testing

@testable import AccessoryHTTPTool

#if canImport(Glibc)
    import Glibc
#endif

/// stderr's lines when its reader is behind: a line that went out in part is ended before the
/// next one, and a line of which nothing went out leaves no mark (it used to, which put a blank
/// line after a whole line nobody had cut).
@Suite("stderr lines")
struct LineWriterTests {
    /// A pipe whose write end does not block, and what it holds (F_GETPIPE_SZ).
    final class Pipe {
        let read: CInt
        let write: CInt
        let capacity: Int

        init() throws {
            var ends: [CInt] = [0, 0]
            try #require(pipe(&ends) == 0)
            self.read = ends[0]
            self.write = ends[1]
            // Neither end blocks: the writer's waits end at its limit, and drain() at the end.
            for end in ends { _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK) }
            self.capacity = Int(fcntl(ends[0], 1032))  // F_GETPIPE_SZ
        }

        deinit {
            close(self.read)
            close(self.write)
        }

        /// Writes `bytes` as one `write`, which must take all of them.
        func fill(_ bytes: [UInt8]) throws {
            try #require(Glibc.write(self.write, bytes, bytes.count) == bytes.count)
        }

        /// Everything the pipe holds.
        func drain() -> [UInt8] {
            var all: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = Glibc.read(self.read, &chunk, chunk.count)
                if count <= 0 { return all }
                all += chunk[0..<count]
            }
        }
    }

    /// A writer whose limit has passed: what the pipe does not take at once is dropped.
    func writerPastItsLimit(_ pipe: Pipe) -> LineWriter {
        let lines = LineWriter(BoundedWriter(plain: pipe.write))
        lines.waitNoLongerThan(.now)
        return lines
    }

    @Test func aLineOfWhichNothingWentOutLeavesNoMark() throws {
        let pipe = try Pipe()
        try #require(pipe.capacity > 0)
        // Full, on a line's end.
        try pipe.fill([UInt8](repeating: UInt8(ascii: "x"), count: pipe.capacity - 1) + [UInt8(ascii: "\n")])
        let lines = self.writerPastItsLimit(pipe)
        lines.write("lost\n")
        #expect(pipe.drain().count == pipe.capacity)
        lines.write("next\n")
        #expect(String(decoding: pipe.drain(), as: UTF8.self) == "next\n")
    }

    @Test func aLineCutShortIsEndedBeforeTheNext() throws {
        let pipe = try Pipe()
        try #require(pipe.capacity > 0)
        let lines = self.writerPastItsLimit(pipe)
        // Longer than the pipe holds: only its first `capacity` bytes go out, inside the line.
        lines.write(String(repeating: "y", count: pipe.capacity + 100) + "\n")
        let first = pipe.drain()
        #expect(first.count == pipe.capacity && first.last == UInt8(ascii: "y"))
        lines.write("next\n")
        #expect(String(decoding: pipe.drain(), as: UTF8.self) == "\nnext\n")
    }

    @Test func aTextCutRightAfterALineEndLeavesNoMark() throws {
        let pipe = try Pipe()
        try #require(pipe.capacity > 0)
        let lines = self.writerPastItsLimit(pipe)
        // The part that goes out ends exactly with the first line's new line.
        lines.write(String(repeating: "y", count: pipe.capacity - 1) + "\n" + "rest\n")
        let first = pipe.drain()
        #expect(first.count == pipe.capacity && first.last == UInt8(ascii: "\n"))
        lines.write("next\n")
        #expect(String(decoding: pipe.drain(), as: UTF8.self) == "next\n")
    }

    @Test func aWholeLineIsWrittenAsItIs() throws {
        let pipe = try Pipe()
        let lines = LineWriter(BoundedWriter(plain: pipe.write))
        lines.write("one\n")
        lines.write("two\n")
        #expect(String(decoding: pipe.drain(), as: UTF8.self) == "one\ntwo\n")
    }
}
