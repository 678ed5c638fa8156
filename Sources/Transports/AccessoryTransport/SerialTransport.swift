import Glibc
import NIOCore
import NIOPosix
import Synchronization

/// A serial tty (`/dev/ttyACM0`, `/dev/ttyUSB0`, a pty) used exclusively in raw mode.
///
/// Each `open` locks the line (`flock` and `TIOCEXCL`, so two processes never interleave
/// requests on one wire), saves its termios settings, applies ``settings`` in raw mode and
/// discards stale input. When the channel closes, the saved settings are restored and the
/// lock released.
///
/// A tty is one descriptor for both directions, so closing the channel's output sends the
/// peer no end-of-file: the HTTP framing above must be self-delimiting.
public struct SerialTransport: ByteStreamTransport {
    /// The tty's path.
    public let path: String
    /// The line settings applied on every open.
    public let settings: SerialSettings
    /// Ports this transport opened whose release (unlock, close) has not finished yet.
    private let unreleased = UnreleasedPorts()

    /// The longest `open` waits for this transport's previous port to be released.
    static let releaseWait: Duration = .seconds(3)

    /// A transport for the tty at `path`. Nothing is opened or checked until `open`.
    ///
    /// - Parameters:
    ///   - path: The tty's path, such as `/dev/ttyACM0`.
    ///   - settings: The line settings applied on every open; 115200 baud, 8N1, no flow control by
    ///     default.
    public init(path: String, settings: SerialSettings = SerialSettings()) {
        self.path = path
        self.settings = settings
    }

    public var description: String { "serial:\(self.path) (\(self.settings))" }

    /// `true`: the wire keeps bytes the accessory sent after the previous stream was closed.
    public var reopenMayCarryStaleBytes: Bool { true }
    /// The device is held by this process until the closed stream released it.
    public var reopenWaitsForRelease: Bool { true }

    /// The baud rate / 10 (a start bit, eight data bits and a stop bit per byte).
    public var bytesPerSecond: Int? { max(1, self.settings.baudRate / 10) }

    public func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        try await self.openTrackingRelease(on: eventLoop, configure: configure).stream
    }

    /// Opens the line; `released` completes once the settings are restored and the lock is
    /// released after the channel closed. Tests wait for it.
    func openTrackingRelease(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> (stream: OpenedByteStream, released: EventLoopFuture<Void>) {
        // The port of a channel that was just closed is released on a thread pool, a moment
        // later; until then it still holds the flock and a reopen (the link reopens after a
        // framing error) would find the line "in use". Wait for it, bounded: `flock` decides.
        let deadline = ContinuousClock.now + Self.releaseWait
        while self.unreleased.count > 0 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(2))
        }
        let port = try SerialPort.open(path: self.path, settings: self.settings)
        // NIO closes what it is given, so it gets a duplicate; the original keeps the lock and
        // is what the settings are restored through.
        let channelDescriptor: FileDescriptor
        do {
            channelDescriptor = try port.descriptor.duplicate()
        } catch {
            port.release()
            throw TransportError(.openFailed, "could not duplicate the descriptor of \(self.path): \(error)")
        }
        let channel: any Channel
        let setUp = PipeSetUp(configure)
        do {
            channel = try await NIOPipeBootstrap(group: eventLoop)
                .channelInitializer(setUp.initializer)
                .takingOwnershipOfDescriptor(inputOutput: channelDescriptor.rawValue)
                .get()
        } catch {
            // A failed future leaves the descriptor with us (the set-up's own failure does not
            // fail the bootstrap: PipeSetUp).
            try? channelDescriptor.close()
            port.release()
            throw TransportError(.openFailed, "could not attach \(self.path) to the event loop: \(error)")
        }
        do {
            try await setUp.check(channel)
        } catch {
            port.release()
            throw TransportError(.openFailed, "could not set up the pipeline on \(self.path): \(error)")
        }
        // The last close of a tty can wait for queued output to drain, so release off the loop.
        let unreleased = self.unreleased
        unreleased.add(1)
        let released = channel.closeFuture.flatMapWithEventLoop { _, loop in
            NIOThreadPool.singleton.runIfActive(eventLoop: loop) { port.release() }
        }
        released.whenComplete { _ in unreleased.add(-1) }
        let stream = OpenedByteStream(
            channel: channel,
            released: { try? await released.get() },
            sendQueue: KernelSendQueue(descriptor: port.descriptor.rawValue)
        )
        return (stream, released)
    }

    /// The current settings of an open terminal descriptor, read with `tcgetattr`.
    ///
    /// - Throws: ``TransportError/Code/wrongKindOfFile`` if `descriptor` is not a terminal.
    public static func currentSettings(descriptor: CInt) throws(TransportError) -> TerminalSettings {
        do {
            return TerminalSettings(try FileDescriptor(rawValue: descriptor).terminalAttributes())
        } catch  where error == .notATerminal {
            throw TransportError(.wrongKindOfFile, "descriptor \(descriptor) is not a terminal")
        } catch {
            throw TransportError(.openFailed, "could not read the settings of descriptor \(descriptor): \(error)")
        }
    }

    /// The current settings of the terminal at `path`, without changing or locking it.
    ///
    /// - Throws: ``TransportError/Code/deviceBusy`` if another process holds the line with
    ///   `TIOCEXCL` (and this process is not root), or the errors of opening a serial line.
    public static func currentSettings(path: String) throws(TransportError) -> TerminalSettings {
        let descriptor: FileDescriptor
        do {
            descriptor = try FileDescriptor.open(path, flags: O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
        } catch {
            throw SerialPort.openError(error, path: path)
        }
        defer { try? descriptor.close() }
        guard descriptor.isTerminal else {
            throw TransportError(.wrongKindOfFile, "\(path) is not a terminal")
        }
        return try Self.currentSettings(descriptor: descriptor.rawValue)
    }
}

/// Counts the ports a ``SerialTransport`` (and its copies) opened and has not yet released.
private final class UnreleasedPorts: Sendable {
    private let value = TrackedMutex(0)

    var count: Int { self.value.withLock { $0 } }

    func add(_ delta: Int) { self.value.withLock { $0 += delta } }
}
