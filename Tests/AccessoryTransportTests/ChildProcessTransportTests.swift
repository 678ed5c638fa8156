import Glibc
import NIOCore
import Testing

@testable import AccessoryTransport

@Suite struct ChildProcessTransportTests {
    /// Whether `pid` is gone for good: not a child of ours (reaped) and not in /proc.
    private func isReaped(_ pid: pid_t) -> Bool {
        var status: CInt = 0
        let waited = waitpid(pid, &status, WNOHANG)
        let noChild = waited == -1 && errno == ECHILD
        let stat = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        if stat >= 0 { close(stat) }
        return noChild && stat < 0
    }

    @Test func catEchoesAndIsReapedAfterClose() async throws {
        let received = ReceivedBytes()
        let (stream, process) = try await ChildProcessTransport(command: "cat")
            .launch(on: testEventLoop, configure: received.configure)
        try await stream.channel.writeText("ping\r\n")
        #expect(await eventually { received.text == "ping\r\n" })

        try await stream.channel.close()
        // cat sees EOF on stdin and exits by itself, well before SIGTERM.
        #expect(await value(of: process.exitFuture) == .exited(0))
        #expect(self.isReaped(process.pid))
    }

    @Test func diagnosticsReportStatusAndStderr() async throws {
        let (stream, process) = try await ChildProcessTransport(command: "echo boom >&2; exit 3")
            .launch(on: testEventLoop, configure: ReceivedBytes().configure)
        // The child exits on its own; its stdout ends, so the channel closes.
        #expect(await value(of: stream.channel.closeFuture) != nil)
        let diagnostics = try #require(await stream.diagnostics())
        #expect(diagnostics.contains("boom"))
        #expect(diagnostics.contains("exited with status 3"))
        #expect(diagnostics.contains("`echo boom >&2; exit 3`"))
        #expect(await eventually { self.isReaped(process.pid) })
    }

    @Test func childIgnoringStdinGetsSIGTERM() async throws {
        let (stream, process) = try await ChildProcessTransport(command: "sleep 30")
            .launch(on: testEventLoop, configure: ReceivedBytes().configure)
        try await stream.channel.close()
        #expect(await value(of: process.exitFuture) == .signaled(SIGTERM))
        #expect(self.isReaped(process.pid))
        #expect(await stream.diagnostics()?.contains("signal 15 (SIGTERM)") == true)
    }

    @Test func childIgnoringSIGTERMGetsSIGKILL() async throws {
        let clock = ContinuousClock()
        let start = clock.now
        let (stream, process) = try await ChildProcessTransport(command: "trap '' TERM; exec sleep 30")
            .launch(on: testEventLoop, configure: ReceivedBytes().configure)
        try await Task.sleep(for: .milliseconds(100))  // let the shell set its trap first
        try await stream.channel.close()
        #expect(await value(of: process.exitFuture, within: .seconds(4)) == .signaled(SIGKILL))
        #expect(clock.now - start < .seconds(4))
        #expect(self.isReaped(process.pid))
    }

    @Test func diagnosticsWhileRunningDoNotWaitLong() async throws {
        let (stream, process) = try await ChildProcessTransport(command: "echo started >&2; exec sleep 30")
            .launch(on: testEventLoop, configure: ReceivedBytes().configure)
        let clock = ContinuousClock()
        let start = clock.now
        let diagnostics = try #require(await stream.diagnostics())
        #expect(clock.now - start < .seconds(1))
        #expect(diagnostics.contains("is still running (pid \(process.pid))"))
        #expect(diagnostics.contains("started"))
        try await stream.channel.close()
        #expect(await value(of: process.exitFuture) != nil)
    }

    @Test func childInheritsOnlyItsStandardDescriptors() async throws {
        let received = ReceivedBytes()
        // `$$` is the shell itself; ls runs as its child and lists the shell's descriptors.
        let (stream, process) = try await ChildProcessTransport(command: "ls /proc/$$/fd")
            .launch(on: testEventLoop, configure: received.configure)
        #expect(await value(of: process.exitFuture) == .exited(0))
        #expect(await value(of: stream.channel.closeFuture) != nil)
        let descriptors = received.text.split(whereSeparator: \.isWhitespace).sorted()
        #expect(descriptors == ["0", "1", "2"])
    }

    @Test func childGetsDefaultSIGPIPE() async throws {
        // NIO ignores SIGPIPE in this process; the child must not inherit that.
        let received = ReceivedBytes()
        let (stream, _) = try await ChildProcessTransport(command: "grep SigIgn /proc/self/status")
            .launch(on: testEventLoop, configure: received.configure)
        #expect(await value(of: stream.channel.closeFuture) != nil)
        let mask = try #require(UInt64(received.text.split(separator: "\t").last?.trimmingWhitespace ?? "", radix: 16))
        #expect(mask & (1 << (UInt64(SIGPIPE) - 1)) == 0, "SigIgn \(received.text)")
    }

    @Test func shellThatCannotStart() async {
        let error = await transportError {
            _ = try await ChildProcessTransport(command: "true", shell: "/nonexistent/sh")
                .open(on: testEventLoop, configure: ReceivedBytes().configure)
        }
        #expect(error?.code == .processFailed)
        #expect(error?.message.contains("/nonexistent/sh") == true)
    }

    @Test func stderrRingBufferKeepsTheTail() {
        let buffer = StderrRingBuffer(capacity: 8)
        buffer.append(ByteBuffer(string: "  hello "))
        #expect(buffer.text == "hello")
        buffer.append(ByteBuffer(string: "world, again\n"))
        #expect(buffer.text == "…, again")
        buffer.append(ByteBuffer(string: String(repeating: "x", count: 100) + "end"))
        #expect(buffer.text == "…xxxxxend")
    }
}

extension Substring {
    fileprivate var trimmingWhitespace: String { String(self.filter { !$0.isWhitespace }) }
}
