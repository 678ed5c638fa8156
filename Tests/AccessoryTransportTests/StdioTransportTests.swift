import Glibc
import NIOCore
import Testing

@testable import AccessoryTransport

/// Pipes and files stand in for descriptors 0 and 1. Serialized: only one stdio stream may
/// be open per process.
@Suite(.serialized) struct StdioTransportTests {
    @Test func carriesBytesAndLeavesTheOriginalsOpenAndBlocking() async throws {
        let toUs = try FileDescriptor.pipe()
        let fromUs = try FileDescriptor.pipe()
        defer { [toUs.read, toUs.write, fromUs.read, fromUs.write].forEach { try? $0.close() } }
        let transport = StdioTransport(input: toUs.read, output: fromUs.write)
        #expect(transport.reopenMayCarryStaleBytes)

        let received = ReceivedBytes()
        let stream = try await transport.open(on: testEventLoop, configure: received.configure)
        #expect(try toUs.read.statusFlags() & O_NONBLOCK != 0, "NIO is expected to make the shared file non-blocking")

        // A second stream would steal bytes from the first.
        let busy = await transportError {
            _ = try await transport.open(on: testEventLoop, configure: received.configure)
        }
        #expect(busy?.code == .deviceBusy)

        _ = "request".withCString { write(toUs.write.rawValue, $0, 7) }
        #expect(await eventually { received.text == "request" })
        try await stream.channel.writeText("response")
        var buffer = [UInt8](repeating: 0, count: 16)
        let count = read(fromUs.read.rawValue, &buffer, buffer.count)
        #expect(String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self) == "response")

        try await stream.channel.close()
        await stream.waitUntilReleased()
        // The stand-ins for 0 and 1 are still open and blocking again once the stream is released.
        #expect((try? toUs.read.statusFlags()).map { $0 & O_NONBLOCK == 0 } ?? false)
        #expect(fcntl(fromUs.write.rawValue, F_GETFD) != -1)

        // Released above (flags restored, in-use mark cleared): a reopen succeeds; the loop only
        // bounds it.
        var again: OpenedByteStream?
        for _ in 0..<200 where again == nil {
            again = try? await transport.open(on: testEventLoop, configure: received.configure)
            if again == nil { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(again != nil, "stdio could not be opened again within 2 s of closing it")
        try await again?.channel.close()
        // Before the stand-ins are closed: a restore after that could land on a reused number.
        await again?.waitUntilReleased()
    }

    @Test func regularFileAndDevNullAreRefused() async throws {
        let path = temporaryPath(".txt")
        let file = try FileDescriptor.open(path, flags: O_CREAT | O_RDWR | O_CLOEXEC)
        let null = try FileDescriptor.open("/dev/null", flags: O_RDWR | O_CLOEXEC)
        let pipe = try FileDescriptor.pipe()
        defer {
            [file, null, pipe.read, pipe.write].forEach { try? $0.close() }
            unlink(path)
        }
        for (input, output, what) in [(file, pipe.write, "a regular file"), (pipe.read, null, "/dev/null")] {
            let error = await transportError {
                _ = try await StdioTransport(input: input, output: output).open(
                    on: testEventLoop,
                    configure: ReceivedBytes().configure
                )
            }
            #expect(error?.code == .wrongKindOfFile)
            #expect(error?.message.contains(what) == true, "\(error?.message ?? "")")
        }
    }
}
