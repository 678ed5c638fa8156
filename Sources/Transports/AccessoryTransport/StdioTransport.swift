import Glibc
import NIOCore
import NIOPosix
import Synchronization

/// This process's own standard input and output as the byte stream pair: what
/// `accessory-http serve --device stdio` uses under `socat` or `ssh`.
///
/// The channel works on duplicates, so closing it does not close descriptors 0 and 1. NIO
/// makes them non-blocking, which also affects whoever shares them (the shell), so the
/// previous mode is restored when the channel closes. Only one stream may use stdio at a
/// time. A terminal on stdin is used as it is, not switched to raw mode: run it under
/// `socat` or `ssh` without `-t`.
public struct StdioTransport: ByteStreamTransport {
    /// Whether a stdio stream is open in this process; two would steal each other's bytes.
    private static let inUse = TrackedMutex(false)

    /// Standard input and output, except in tests.
    let input: FileDescriptor
    let output: FileDescriptor

    /// This process's standard input and output (descriptors 0 and 1), with ``allowsHalfClose`` off.
    public init() {
        self.init(input: .standardInput, output: .standardOutput)
    }

    /// Whether the end of stdin is a half-close: the peer has sent all it will, and what is
    /// being answered is still written before the link ends. A responder wants this
    /// (`printf 'GET /status …' | accessory-http serve --device stdio` gets its answer, as
    /// `nc -N` does from a socket); a host does not (a device that ends its output is gone).
    /// Either way, a reader of stdout that goes away ends the link.
    public var allowsHalfClose: Bool = false

    /// Tests substitute pipes and files for descriptors 0 and 1.
    init(input: FileDescriptor, output: FileDescriptor, allowsHalfClose: Bool = false) {
        self.input = input
        self.output = output
        self.allowsHalfClose = allowsHalfClose
    }

    public var description: String { "stdio" }

    /// `true`: a reopened stream reads on from the same stdin.
    public var reopenMayCarryStaleBytes: Bool { true }
    /// The device is held by this process until the closed stream released it.
    public var reopenWaitsForRelease: Bool { true }

    public func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        let (standardInput, standardOutput) = (self.input, self.output)
        try self.checkUsable(standardInput, name: "stdin")
        try self.checkUsable(standardOutput, name: "stdout")
        guard
            Self.inUse.withLock({ inUse in
                defer { inUse = true }; return !inUse
            })
        else {
            throw TransportError(.deviceBusy, "stdio is already in use by another stream of this process")
        }
        let savedFlags = (input: try? standardInput.statusFlags(), output: try? standardOutput.statusFlags())
        let restore: @Sendable () -> Void = {
            if let flags = savedFlags.input { try? standardInput.setStatusFlags(flags) }
            if let flags = savedFlags.output { try? standardOutput.setStatusFlags(flags) }
            Self.inUse.withLock { $0 = false }
        }

        let input: FileDescriptor
        let output: FileDescriptor
        do {
            input = try standardInput.duplicate()
            do {
                output = try standardOutput.duplicate()
            } catch {
                try? input.close()
                throw error
            }
        } catch {
            restore()
            throw TransportError(.openFailed, "could not duplicate stdin and stdout: \(error)")
        }

        // With half-closes, a watch on a duplicate of stdout (see OutputHangUpWatch).
        let watched: FileDescriptor?
        if self.allowsHalfClose {
            do {
                watched = try output.duplicate()
            } catch {
                try? input.close()
                try? output.close()
                restore()
                throw TransportError(.openFailed, "could not duplicate stdout: \(error)")
            }
        } else {
            watched = nil
        }
        let watchedDescriptor = watched?.rawValue
        let channel: any Channel
        // The set-up's failure must not fail the bootstrap: NIO would close the descriptors
        // itself, and the catch below would close them a second time (PipeSetUp).
        let setUp = PipeSetUp { channel in
            guard let watchedDescriptor else { return configure(channel) }
            return channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(OutputHangUpWatch(watched: watchedDescriptor))
            }.flatMap { configure(channel) }
        }
        do {
            channel = try await NIOPipeBootstrap(group: eventLoop)
                .channelOption(.allowRemoteHalfClosure, value: self.allowsHalfClose)
                .channelInitializer(setUp.initializer)
                .takingOwnershipOfDescriptors(input: input.rawValue, output: output.rawValue)
                .get()
        } catch {
            // A failed future leaves the descriptors with us (checkUsable refused what epoll
            // would, on which NIO traps rather than fails).
            try? watched?.close()
            try? input.close()
            try? output.close()
            restore()
            throw TransportError(.openFailed, "could not attach stdin and stdout to the event loop: \(error)")
        }
        do {
            try await setUp.check(channel)
        } catch {
            try? watched?.close()
            restore()
            throw TransportError(.openFailed, "could not set up the pipeline on stdio: \(error)")
        }
        // Released once the flags are restored: until then a caller that closes the descriptors
        // (a test's stand-ins for 0 and 1) could see the restore land on a number reused for
        // another file, a NIO socket then made blocking (seen: an event loop stuck in writev).
        let restored = eventLoop.makePromise(of: Void.self)
        channel.closeFuture.whenComplete { _ in
            try? watched?.close()
            restore()
            restored.succeed(())
        }
        return OpenedByteStream(
            channel: channel,
            released: { try? await restored.futureResult.get() },
            sendQueue: KernelSendQueue(descriptor: output.rawValue)
        )
    }

    /// NIO accepts only pipes, sockets and character devices epoll can watch (not /dev/null or
    /// /dev/zero: NIO traps on those).
    private func checkUsable(_ descriptor: FileDescriptor, name: String) throws(TransportError) {
        let kind: FileKind
        do {
            kind = try descriptor.kind()
        } catch {
            throw TransportError(
                .openFailed,
                "\(name) is not open (\(error)); run this with \(name) connected to a pipe, socket or terminal"
            )
        }
        switch kind {
        case .regularFile, .directory, .blockDevice, .symbolicLink:
            throw TransportError(
                .wrongKindOfFile,
                "\(name) is \(kind), which cannot carry a byte stream; connect it to a pipe, socket or terminal (e.g. run under socat or ssh)"
            )
        default:
            if descriptor.isNullDevice {
                throw TransportError(
                    .wrongKindOfFile,
                    "\(name) is /dev/null, which cannot carry a byte stream; connect it to a pipe, socket or terminal (e.g. run under socat or ssh)"
                )
            }
            if !ReadinessWatch.accepts(descriptor.rawValue) {
                throw TransportError(
                    .wrongKindOfFile,
                    "\(name) is a device that is always ready (such as /dev/zero), which cannot carry a byte stream; connect it to a pipe, socket or terminal (e.g. run under socat or ssh)"
                )
            }
        }
    }
}
