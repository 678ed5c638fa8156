import AccessoryTransport
import NIOCore
import NIOPosix
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A layer's pipeline set-up that fails (`configure` returns a failed future: a TLS context
/// OpenSSL refuses, a handler that cannot be added) is an error of the open, not a crash, and
/// leaves no descriptor open. Before 2026-12-06 it crashed the process (SIGILL): NIO closes the
/// descriptors itself when a pipe bootstrap's initializer fails, then traps closing its own
/// duplicate again (`PipeSetUp` now keeps the failure out of the bootstrap). Run in a child
/// process (an exit test), so that a crash fails the test and not the run.
@Suite struct FailedConfigureTests {
    struct Refused: Error {}

    /// Descriptors this process has open.
    static func openDescriptors() -> Int {
        (try? FileManagerLite.count(directory: "/proc/self/fd")) ?? -1
    }

    @Test func aSocketPairWhoseConfigureFailsIsAnError() async throws {
        await #expect(processExitsWith: .success) {
            let transport = SocketPairTransport { close($0) }
            let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
            // One open that fails first: NIO's own descriptors (its event loop's) exist after it.
            _ = try? await transport.open(on: eventLoop) { $0.eventLoop.makeFailedFuture(Refused()) }
            try? await Task.sleep(for: .milliseconds(100))
            let before = FailedConfigureTests.openDescriptors()
            for _ in 0..<8 {
                do {
                    _ = try await transport.open(on: eventLoop) { $0.eventLoop.makeFailedFuture(Refused()) }
                    exit(2)  // opened although its set-up failed
                } catch {}
            }
            // Give NIO's closes a moment to land, then count.
            try? await Task.sleep(for: .milliseconds(200))
            exit(FailedConfigureTests.openDescriptors() <= before ? 0 : 3)
        }
    }
}

/// Counts a directory's entries without Foundation.
enum FileManagerLite {
    static func count(directory: String) throws -> Int {
        guard let handle = opendir(directory) else { throw FailedConfigureTests.Refused() }
        defer { closedir(handle) }
        var count = 0
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { count += 1 }
        }
        return count - 1  // the directory handle itself
    }
}
