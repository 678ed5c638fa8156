import NIOCore
import NIOPosix
import Testing

@testable import AccessoryTransport

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

/// The child-process and stdio transports, whose failing set-up made NIO close their
/// descriptors and then closed them a second time (before 2026-12-06). A second close can end
/// a descriptor another thread was just given: here, whatever the channel's close hands its
/// numbers to (two `/dev/null` opens in a close callback) must still be open after the open
/// failed. Exit tests, as above.
extension FailedConfigureTests {
    /// What the close callback opened, for the check after the open failed.
    static let reopened = TrackedMutex<[CInt]>([])

    /// A set-up that fails, after having its channel's close reuse the freed numbers.
    static func failingReusingConfigure(_ channel: any Channel) -> EventLoopFuture<Void> {
        channel.closeFuture.whenComplete { _ in
            let numbers = (0..<2).map { _ in open("/dev/null", O_RDONLY | O_CLOEXEC) }
            FailedConfigureTests.reopened.withLock { $0 += numbers }
        }
        return channel.eventLoop.makeFailedFuture(Refused())
    }

    /// Exit status 0 when every number the close callbacks opened is still open.
    static func reopenedAreStillOpen() -> Int32 {
        let numbers = FailedConfigureTests.reopened.withLock { $0 }
        guard !numbers.isEmpty else { return 4 }  // the close callback never ran
        return numbers.allSatisfy { $0 >= 0 && fcntl($0, F_GETFD) != -1 } ? 0 : 5
    }

    @Test func aChildProcessWhoseConfigureFailsClosesItsPipesOnce() async throws {
        await #expect(processExitsWith: .success) {
            let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
            for _ in 0..<4 {
                do {
                    _ = try await ChildProcessTransport(command: "cat").open(
                        on: eventLoop,
                        configure: FailedConfigureTests.failingReusingConfigure
                    )
                    exit(2)
                } catch {}
            }
            exit(FailedConfigureTests.reopenedAreStillOpen())
        }
    }

    @Test func stdioWhoseConfigureFailsClosesItsDuplicatesOnce() async throws {
        await #expect(processExitsWith: .success) {
            var ends: [CInt] = [0, 0]
            guard pipe(&ends) == 0 else { exit(6) }
            let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
            for _ in 0..<4 {
                do {
                    _ = try await StdioTransport(
                        input: FileDescriptor(rawValue: ends[0]),
                        output: FileDescriptor(rawValue: ends[1])
                    ).open(
                        on: eventLoop,
                        configure: FailedConfigureTests.failingReusingConfigure
                    )
                    exit(2)
                } catch {}
            }
            exit(FailedConfigureTests.reopenedAreStillOpen())
        }
    }
}
