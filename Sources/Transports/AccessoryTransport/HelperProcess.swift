import Glibc
import NIOCore
import NIOPosix

/// A long-running helper program (the bridge's `avahi-publish`) in a process group of its own:
/// its standard input is `/dev/null`, each line it writes to standard output or error is handed
/// to `output`, and ``stop()`` ends the whole group (SIGTERM, SIGKILL two seconds later) and
/// returns once it is reaped. A helper that exits on its own is reaped at once as well.
package final class HelperProcess: Sendable {
    private let process: ChildProcess

    private init(_ process: ChildProcess) {
        self.process = process
    }

    /// Starts `arguments[0]` (an absolute path) with `arguments` as its argv.
    ///
    /// When util-linux's `setpriv` is installed the helper runs under `setpriv --pdeathsig
    /// TERM`, and is spawned from the thread that reads its output, which lives exactly as long
    /// as the helper: if this process dies without ``stop()`` (SIGKILL, a crash), the kernel
    /// sends the helper SIGTERM, so an advertisement never outlives the bridge that made it.
    /// (The death signal follows the thread that spawned the child, so it must be one that
    /// does not end before the helper does.)
    package static func start(
        _ arguments: [String],
        output: @escaping @Sendable (String) -> Void
    ) async throws(Errno) -> HelperProcess {
        let setpriv = "/usr/bin/setpriv"
        let command = access(setpriv, X_OK) == 0 ? [setpriv, "--pdeathsig", "TERM", "--"] + arguments : arguments
        let null = try FileDescriptor.open("/dev/null", flags: O_RDONLY | O_CLOEXEC)
        let pipe: (read: FileDescriptor, write: FileDescriptor)
        do {
            pipe = try FileDescriptor.pipe()
        } catch {
            try? null.close()
            throw error
        }
        let started: Result<ChildProcess, Errno> = await withCheckedContinuation { continuation in
            do throws(Errno) {
                try DetachedThread.start {
                    let spawned = Result { () throws(Errno) in
                        try ChildProcess.spawn(
                            command,
                            standardInput: null,
                            standardOutput: pipe.write,
                            standardError: pipe.write,
                            exitReportedOn: MultiThreadedEventLoopGroup.singleton.any()
                        )
                    }
                    // The child has its copies; ours would keep the reader from seeing the end.
                    try? null.close()
                    try? pipe.write.close()
                    continuation.resume(returning: spawned)
                    guard case .success = spawned else {
                        try? pipe.read.close()
                        return
                    }
                    Self.readLines(from: pipe.read, output)
                }
            } catch {
                try? null.close()
                try? pipe.write.close()
                try? pipe.read.close()
                continuation.resume(returning: .failure(error))
            }
        }
        return HelperProcess(try started.get())
    }

    /// How the helper ended ("exited with status 1", "killed by signal 15"), `nil` while it runs.
    package var exitDescription: String? { self.process.exitStatus.map { "\($0)" } }

    /// Completes when the helper has exited and been reaped.
    package var exited: EventLoopFuture<Void> { self.process.exitFuture.map { _ in } }

    /// Ends the helper's process group and waits until it is gone.
    package func stop() async {
        self.process.terminate(grace: .zero, killAfter: .seconds(2), on: self.process.exitFuture.eventLoop)
        await self.process.waitUntilGroupEnded(limit: .seconds(2))
    }

    /// Reads `descriptor` to its end (blocking: on a thread of its own), one line at a time.
    private static func readLines(from descriptor: FileDescriptor, _ output: @Sendable (String) -> Void) {
        defer { try? descriptor.close() }
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor.rawValue, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            pending += buffer[..<count]
            while let end = pending.firstIndex(of: UInt8(ascii: "\n")) {
                output(String(decoding: pending[..<end], as: UTF8.self))
                pending.removeSubrange(...end)
            }
            // A helper that never ends a line must not grow this without bound.
            if pending.count > 4096 {
                output(String(decoding: pending, as: UTF8.self))
                pending.removeAll()
            }
        }
        if !pending.isEmpty { output(String(decoding: pending, as: UTF8.self)) }
    }
}
