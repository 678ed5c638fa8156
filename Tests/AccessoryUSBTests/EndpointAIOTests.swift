import Testing

@testable import AccessoryFunctionFS

#if canImport(Glibc)
    import Glibc
#endif

/// The native AIO plumbing under FunctionFS's writer, on a plain file (FunctionFS itself is only
/// in the USB VM): a submitted write and read complete in their slots, the eventfd says so, the
/// result is the byte count, and a refused submission names its errno.
@Suite("native AIO")
struct EndpointAIOTests {
    @Test func transfersCompleteInTheirSlotsAndSignalTheEventDescriptor() throws {
        var failure: CInt = 0
        let aio = try #require(EndpointAIO(depth: 4, failure: &failure), "io_setup failed: errno \(failure)")
        let path = "/tmp/ahaio-\(UInt32.random(in: 0...UInt32.max))"
        let file = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        try #require(file >= 0)
        defer {
            close(file)
            unlink(path)
        }
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 8)
        defer { buffer.deallocate() }
        let text = Array("accessory-http".utf8)
        buffer.copyMemory(from: text, byteCount: text.count)

        #expect(aio.submit(slot: 2, isWrite: true, descriptor: file, buffer: buffer, length: text.count) == 0)
        var ready = pollfd(fd: aio.eventDescriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&ready, 1, 5000) == 1, "the eventfd never said a transfer completed")
        let written = aio.reap()
        #expect(written.map(\.slot) == [2])
        #expect(written.first?.result == text.count)
        ready.revents = 0
        #expect(poll(&ready, 1, 0) == 0, "reap() left the eventfd readable")
        #expect(aio.reap().isEmpty)

        let back = UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 8)
        defer { back.deallocate() }
        #expect(aio.submit(slot: 0, isWrite: false, descriptor: file, buffer: back, length: 64) == 0)
        #expect(poll(&ready, 1, 5000) == 1)
        let read = aio.reap()
        #expect(read.map(\.slot) == [0])
        #expect(read.first?.result == text.count)
        #expect(Array(UnsafeRawBufferPointer(start: back, count: text.count)) == text)
    }

    @Test func aRefusedSubmissionNamesItsErrno() throws {
        var failure: CInt = 0
        let aio = try #require(EndpointAIO(depth: 1, failure: &failure), "io_setup failed: errno \(failure)")
        let file = open("/dev/null", O_RDONLY | O_CLOEXEC)
        try #require(file >= 0)
        defer { close(file) }
        var byte: UInt8 = 0
        #expect(aio.submit(slot: 0, isWrite: true, descriptor: file, buffer: &byte, length: 1) == EBADF)
        #expect(aio.reap().isEmpty)
    }
}
