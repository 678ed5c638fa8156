import AccessoryResponder
import AccessoryTestSupport
import AccessoryTransport
import Foundation
import NIOCore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A responder serving a terminal (a gadget's /dev/ttyGS0, a USB-serial line) whose host hangs
/// up in the middle of a download: `serve(descriptor:)` returns, so a serve loop opens the line
/// again for the next host. The host is a pty's master; closing it hangs the slave up, as an
/// unplug does. 16 tries: which side of the line the kernel reports first is a matter of timing.
@Suite(.timeLimit(.minutes(1)))
struct TerminalHangUpTests {
    static let responder = HTTPResponder { request in
        if request.head.path == "/status" {
            return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "ok\n")))
        }
        return ResponderResponse(
            status: .ok,
            body: .stream(length: nil) { writer in
                let block = ByteBuffer(repeating: 0x61, count: 16 * 1024)
                while true { try await writer.write(block) }
            }
        )
    }

    /// One host end: the pty's master, nonblocking, read and written by polling.
    struct Host {
        let master: CInt

        func send(_ text: String) throws {
            let bytes = Array(text.utf8)
            let written = bytes.withUnsafeBytes { write(self.master, $0.baseAddress, $0.count) }
            try #require(written == bytes.count, "write to the pty master: \(String(cString: strerror(errno)))")
        }

        /// Reads until `enough` says so, or fails after `bound`.
        func read(within bound: Duration, until enough: ([UInt8]) -> Bool) async throws -> [UInt8] {
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            let started = ContinuousClock.now
            while !enough(received) {
                let count = buffer.withUnsafeMutableBytes { Glibc.read(self.master, $0.baseAddress, $0.count) }
                if count > 0 {
                    received += buffer.prefix(count)
                } else {
                    try #require(ContinuousClock.now - started < bound, "no answer within \(bound)")
                    try await Task.sleep(for: .milliseconds(2))
                }
            }
            return received
        }

        /// Asks for /status until it is answered: a serial transport discards what arrived on
        /// the line before it opened it (stale bytes of someone else's exchange).
        func waitUntilServed() async throws {
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            let started = ContinuousClock.now
            while !String(decoding: received, as: UTF8.self).hasSuffix("ok\n") {
                try #require(
                    ContinuousClock.now - started < TimeBounds.scaled(.seconds(5)),
                    "the line was never served"
                )
                try self.send("GET /status HTTP/1.1\r\nHost: accessory\r\n\r\n")
                try await Task.sleep(for: .milliseconds(50))
                let count = buffer.withUnsafeMutableBytes { Glibc.read(self.master, $0.baseAddress, $0.count) }
                if count > 0 { received += buffer.prefix(count) }
            }
        }
    }

    /// How the responder is given the line: a descriptor (the emulator, a serve loop of one's
    /// own) or a serial transport (`accessory-http serve --device serial:PATH`).
    enum Served: String, CaseIterable, Sendable {
        case descriptor
        case serialTransport
    }

    /// Opens a pty, serves its slave, and returns the host end and the serve task.
    static func servedTerminal(_ served: Served) throws -> (Host, Task<Void, Never>) {
        let terminal = try PseudoTerminal.open()
        let flags = fcntl(terminal.master, F_GETFL)
        _ = fcntl(terminal.master, F_SETFL, flags | O_NONBLOCK)
        switch served {
        case .descriptor:
            let slave = open(terminal.slavePath, O_RDWR | O_NOCTTY | O_CLOEXEC)
            try #require(slave >= 0, "open \(terminal.slavePath): \(String(cString: strerror(errno)))")
            return (Host(master: terminal.master), Task { _ = try? await Self.responder.serve(descriptor: slave) })
        case .serialTransport:
            let transport = SerialTransport(path: terminal.slavePath)
            return (Host(master: terminal.master), Task { _ = try? await Self.responder.serve(transport: transport) })
        }
    }

    @Test(arguments: Served.allCases)
    func serveReturnsWhenTheHostHangsUpMidDownload(_ served: Served) async throws {
        for round in 0..<16 {
            let (host, serving) = try Self.servedTerminal(served)
            try await host.waitUntilServed()
            try host.send("GET /endless HTTP/1.1\r\nHost: accessory\r\n\r\n")
            _ = try await host.read(within: TimeBounds.scaled(.seconds(5))) { $0.count >= 256 * 1024 }
            // The host stops reading until the accessory's writes wait for room, then hangs up.
            try await Task.sleep(for: .milliseconds(20 + round * 5))
            close(host.master)
            let hungUp = ContinuousClock.now
            let ended = await Self.ends(serving, within: TimeBounds.scaled(.seconds(2)))
            #expect(ended, "round \(round): serve still running \(ContinuousClock.now - hungUp) after the hang-up")

            // The next host on the next line is answered.
            let (next, nextServing) = try Self.servedTerminal(served)
            try await next.waitUntilServed()
            close(next.master)
            #expect(await Self.ends(nextServing, within: TimeBounds.scaled(.seconds(2))), "round \(round): idle line")
        }
    }

    /// Whether `task` finishes within `bound`.
    static func ends(_ task: Task<Void, Never>, within bound: Duration) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await task.value
                return true
            }
            group.addTask {
                try? await Task.sleep(for: bound)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            if !first { task.cancel() }
            return first
        }
    }
}
