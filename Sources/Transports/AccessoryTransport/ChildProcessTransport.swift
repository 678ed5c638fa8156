import Glibc
import NIOCore
import NIOPosix

/// Runs a command with `/bin/sh -c` and uses its standard input and output as the byte
/// stream pair, e.g. `socat - /dev/ttyACM0,raw,echo=0` or `ssh host accessory-http serve
/// --device stdio`.
///
/// Each `open` starts a new process. Its stderr is kept (the last 4 KiB) for
/// ``OpenedByteStream/diagnostics()``. The command runs in a process group of its own. When the
/// channel closes, the child's stdin closes; if its group is still running after a short grace
/// period, the whole group gets `SIGTERM`, then `SIGKILL`, so a wrapper script's children end
/// with it; the child is always reaped.
public struct ChildProcessTransport: ByteStreamTransport {
    /// The shell command line.
    public let command: String
    /// The shell; only tests change it (to check a shell that cannot be started).
    let shell: String

    /// How long a child may take to exit on its own after its stdin closed.
    static let terminationGrace: TimeAmount = .milliseconds(250)
    /// How long after `SIGTERM` a child is killed.
    static let killDelay: TimeAmount = .seconds(1)
    /// The longest ``OpenedByteStream/diagnostics()`` waits for the child to exit.
    static let diagnosticsWait: Duration = .milliseconds(500)

    /// Whether every run of the command is an independent stream (see ``DeviceSpec/exec(command:independentStreams:)``).
    public let opensIndependentStreams: Bool

    /// A transport that runs `command` with `/bin/sh -c` on every open.
    ///
    /// - Parameters:
    ///   - command: the shell command line.
    ///   - opensIndependentStreams: every run of `command` is its own stream, not a
    ///     door to a line another run may still be talking on; then an abandoned response ends
    ///     the run instead of being drained. Off by default.
    public init(command: String, opensIndependentStreams: Bool = false) {
        self.init(command: command, shell: "/bin/sh", opensIndependentStreams: opensIndependentStreams)
    }

    init(command: String, shell: String, opensIndependentStreams: Bool = false) {
        self.command = command
        self.shell = shell
        self.opensIndependentStreams = opensIndependentStreams
    }

    public var description: String { (self.opensIndependentStreams ? "exec?independent:" : "exec:") + self.command }

    public func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        try await self.launch(on: eventLoop, configure: configure).stream
    }

    /// Starts the child and returns it along with the stream, so tests can watch its pid.
    func launch(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> (stream: OpenedByteStream, process: ChildProcess) {
        let pipes = try self.makePipes()
        let process: ChildProcess
        do {
            process = try ChildProcess.spawn(
                [self.shell, "-c", self.command],
                standardInput: pipes.stdin.read,
                standardOutput: pipes.stdout.write,
                standardError: pipes.stderr.write,
                exitReportedOn: eventLoop
            )
        } catch {
            pipes.closeAll()
            throw TransportError(.processFailed, "could not start `\(self.command)` with \(self.shell) -c: \(error)")
        }
        // The child has its own copies now; ours would keep its stdin from ever seeing EOF.
        pipes.closeChildEnds()

        let stderr = StderrRingBuffer()
        // Neither set-up may fail its bootstrap: NIO would close the descriptors itself, and
        // the catches below would close them a second time (PipeSetUp).
        let stderrSetUp = PipeSetUp { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(StderrCollector(into: stderr))
            }
        }
        var attachedStderr: (any Channel)?
        do {
            let opened = try await NIOPipeBootstrap(group: eventLoop)
                .channelInitializer(stderrSetUp.initializer)
                .takingOwnershipOfDescriptor(input: pipes.stderr.read.rawValue)
                .get()
            attachedStderr = opened
            try await stderrSetUp.check(opened)
        } catch {
            // A failed bootstrap leaves the descriptor with us; a failed set-up closed the
            // channel. Diagnostics lose the stderr text, nothing else.
            if attachedStderr == nil { try? pipes.stderr.read.close() }
            attachedStderr = nil
        }
        let stderrChannel = attachedStderr

        let channel: any Channel
        let setUp = PipeSetUp(configure)
        do {
            channel = try await NIOPipeBootstrap(group: eventLoop)
                .channelInitializer(setUp.initializer)
                .takingOwnershipOfDescriptors(input: pipes.stdout.read.rawValue, output: pipes.stdin.write.rawValue)
                .get()
        } catch {
            // A failed future leaves the descriptors with us.
            try? pipes.stdout.read.close()
            try? pipes.stdin.write.close()
            process.terminate(grace: .zero, killAfter: Self.killDelay, on: eventLoop)
            stderrChannel?.close(promise: nil)
            throw TransportError(
                .processFailed,
                "could not attach the pipes of `\(self.command)` to the event loop: \(error)"
            )
        }
        do {
            try await setUp.check(channel)
        } catch {
            process.terminate(grace: .zero, killAfter: Self.killDelay, on: eventLoop)
            stderrChannel?.close(promise: nil)
            throw TransportError(
                .processFailed,
                "could not set up the pipeline on the pipes of `\(self.command)`: \(error)"
            )
        }

        channel.closeFuture.whenComplete { _ in
            process.terminate(grace: Self.terminationGrace, killAfter: Self.killDelay, on: eventLoop)
        }
        // A grandchild that inherited stderr could hold it open forever; stop listening a
        // little after the child itself has gone.
        process.exitFuture.whenComplete { _ in
            eventLoop.scheduleTask(in: .milliseconds(500)) { stderrChannel?.close(promise: nil) }
        }

        let command = self.command
        let stream = OpenedByteStream(
            channel: channel,
            diagnostics: {
                await Self.describe(process, command: command, stderr: stderr, stderrOpen: stderrChannel != nil)
            },
            // Closing starts the grace period, then SIGTERM, then SIGKILL to the child's whole
            // process group; released once the child is reaped and no process of its group is
            // left (a grandchild that ignores SIGTERM gets the group's SIGKILL).
            released: { await process.waitUntilGroupEnded(limit: .seconds(2)) },
            sendQueue: KernelSendQueue(descriptor: pipes.stdin.write.rawValue)
        )
        return (stream, process)
    }

    /// "child process `CMD` exited with status 1; its stderr ended with: …", after waiting up
    /// to ``diagnosticsWait`` for the child to exit and its stderr to end.
    private static func describe(_ process: ChildProcess, command: String, stderr: StderrRingBuffer, stderrOpen: Bool)
        async -> String
    {
        // The caller may be cancelled (an open that a shutdown cancelled): the poll must still
        // wait, not spin and starve the very child it waits for.
        let clock = ContinuousClock()
        let deadline = clock.now + Self.diagnosticsWait
        while clock.now < deadline, process.exitStatus == nil || (stderrOpen && !stderr.hasEnded) {
            await sleepUncancelled(for: .milliseconds(10))
        }
        let state = process.exitStatus.map(\.description) ?? "is still running (pid \(process.pid))"
        let text = stderr.text
        let tail = text.isEmpty ? "it wrote nothing to stderr" : "its stderr ended with: \(text)"
        return "child process `\(command)` \(state); \(tail)"
    }

    private func makePipes() throws(TransportError) -> ChildPipes {
        do {
            return try ChildPipes()
        } catch {
            throw TransportError(.processFailed, "could not create pipes for `\(self.command)`: \(error)")
        }
    }
}
