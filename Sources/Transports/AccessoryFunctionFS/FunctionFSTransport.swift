import AccessoryTransport
import Logging
import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The accessory side of a USB link on Linux gadget hardware: a FunctionFS function, mounted at
/// ``directory``, served as a byte stream pair.
///
/// The first ``open(on:configure:)`` writes the descriptors and strings to `ep0` (the gadget must
/// be bound to a UDC only after that; see `scripts/usb-gadget`) and starts three threads: one
/// reads `ep0` events, one carries host-to-device bytes from `ep2` into the current link, one
/// carries the current link's bytes to `ep1`. Both queue several transfers at once through the
/// kernel's native AIO, as adbd does; a write of an abandoned generation is cancelled, and a
/// zero-length packet follows a write that fills whole packets when nothing more follows at once.
///
/// Each link lasts from the host enabling the function (configuration, or selecting the
/// interface's alternate setting, which the USB host transport does on every open) until it is
/// disabled, re-enabled or unbound, or the responder closes its end. Bytes of an abandoned link
/// are dropped, so a new host session always starts in step. Serve it in a loop:
///
/// ```swift
/// let transport = FunctionFSTransport(directory: "/dev/ffs-accessory")
/// while !Task.isCancelled {
///     try await EmulatedAccessory().makeResponder().serve(transport: transport, on: loop)
/// }
/// ```
public final class FunctionFSTransport: ByteStreamTransport {
    /// Settings of the function.
    public struct Configuration: Sendable, Hashable {
        /// The interface the function describes to the host.
        public var descriptors = FunctionFSDescriptors()
        /// The buffer of each `ep2` read, larger than any host transfer (64 KiB).
        public var readSize = 64 * 1024
        /// Reads of `ep2` queued in the kernel at once through native AIO (4; 1 or less: one
        /// blocking `read` at a time, which is also what a kernel without AIO gets).
        public var readsInFlight = 4
        /// The largest write to `ep1` (64 KiB: in the USB VM a raw HTTP download from
        /// `serve-gadget` went from 47.6 MiB/s with 16 KiB writes to 85.5; docs/performance.md).
        public var writeSize = 64 * 1024
        /// Writes to `ep1` queued in the kernel at once through native AIO (4; 1 or less: one
        /// blocking `write` at a time, which is also what a kernel without AIO gets).
        public var writesInFlight = 4
        /// Send a zero-length packet after a write that is a multiple of the packet size.
        public var zeroLengthPackets = true

        /// The defaults: this project's own interface (the defaults of ``FunctionFSDescriptors``, 0xFF/0x48/0x01),
        /// 64 KiB reads and writes with 4 of each in flight, and zero-length packets on.
        public init() {}
    }

    /// A link's end of the socketpair; closed when the last thread using it lets go.
    final class Link: Sendable {
        let descriptor: CInt
        let generation: Int
        /// Bytes carried host → device and device → host, for the log.
        let bytesIn = Atomic<Int>(0)
        let bytesOut = Atomic<Int>(0)
        private let ended = Atomic<Bool>(false)
        /// The responder's channel on the other end of the socketpair.
        private let channel = TrackedMutex<(any Channel)?>(nil)
        init(descriptor: CInt, generation: Int) {
            self.descriptor = descriptor
            self.generation = generation
        }
        deinit { _ = close(self.descriptor) }

        func attach(_ channel: any Channel) {
            let endedAlready = self.channel.withLock { slot in
                slot = channel
                return self.ended.load(ordering: .acquiring)
            }
            if endedAlready { channel.close(promise: nil) }
        }

        /// Shuts the link's socket down and closes the responder's channel; returns whether this
        /// call did (the first one).
        ///
        /// The channel is closed, not left to notice the shutdown: in the USB VM, after an unbind
        /// mid-download, serve-gadget's responder never saw the link end with the shutdown alone
        /// (3 of 3 tries, deaf until restarted). Why is not pinned down: the same shutdown on a
        /// plain socketpair under `serve --device stdio` does end the link.
        @discardableResult
        func end() -> Bool {
            _ = shutdown(self.descriptor, CInt(SHUT_RDWR))
            let first = !self.ended.exchange(true, ordering: .acquiringAndReleasing)
            self.channel.withLock { $0 }?.close(promise: nil)
            return first
        }
    }

    struct State {
        var started = false
        var startError: String?
        var control: CInt = -1
        var input: CInt = -1
        var output: CInt = -1
        var enabled = false
        var generation = 0
        var link: Link?
        var maxPacketSize = 512
        var lastEvent = "none yet"
        /// ``haltOutputEndpointAfterNextEnable()`` was called while this generation was current.
        var outputHaltArmedAt: Int?
    }

    /// Where `functionfs` is mounted for this function, e.g. `/dev/ffs-accessory`.
    public let directory: String
    /// The function's settings; the descriptors are written to `ep0` once, on the first open.
    public let configuration: Configuration
    let state = TrackedMutex(State())
    let logger = Logger(label: "accessory-http.functionfs")

    /// A transport for the function mounted at `directory`; nothing is opened until the first
    /// ``open(on:configure:)``.
    ///
    /// - Parameters:
    ///   - directory: Where `functionfs` is mounted for this function, e.g. `/dev/ffs-accessory`.
    ///   - configuration: The function's settings (``Configuration/init()``'s defaults if omitted).
    public init(directory: String, configuration: Configuration = .init()) {
        self.directory = directory
        self.configuration = configuration
    }

    public var description: String { "functionfs:\(self.directory)" }

    /// Whether the host has enabled the function (it is configured and not unbound).
    public var isEnabled: Bool { self.state.withLock { $0.enabled } }

    public func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        try self.startIfNeeded()
        // Wait for the host to enable the function and for the previous link to be over.
        var link: Link?
        var local: CInt = -1
        while link == nil {
            try Task.checkCancellation()
            let ready = self.state.withLock { $0.enabled && $0.link == nil }
            if ready {
                let (mine, theirs) = try SocketPairTransport.makeSocketPair()
                link = self.state.withLock { state -> Link? in
                    guard state.enabled, state.link == nil else { return nil }
                    let link = Link(descriptor: theirs, generation: state.generation)
                    state.link = link
                    return link
                }
                if let link {
                    local = mine
                    self.logger.info("link opened", metadata: ["generation": "\(link.generation)"])
                } else {
                    _ = close(mine)
                    _ = close(theirs)
                }
            } else {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        let setUp = PipeSetUp(configure)
        let channel: any Channel
        do {
            channel = try await NIOPipeBootstrap(group: eventLoop)
                .channelOption(.allowRemoteHalfClosure, value: true)
                .channelInitializer(setUp.initializer)
                .takingOwnershipOfDescriptor(inputOutput: local)
                .get()
        } catch {
            _ = close(local)
            if let link { self.end(link, because: "it could not be attached to the event loop") }
            throw TransportError(.openFailed, "could not attach \(self) to the event loop: \(error)")
        }
        do {
            try await setUp.check(channel)
            link?.attach(channel)
            let transport = self
            return OpenedByteStream(channel: channel) {
                transport.state.withLock { "last FunctionFS event: \($0.lastEvent)" }
            }
        } catch {
            if let link { self.end(link, because: "its pipeline could not be set up") }
            throw TransportError(.openFailed, "could not set up the pipeline on \(self): \(error)")
        }
    }

    /// Stalls the bulk IN endpoint, for fault-injection tests: the host's pending and next reads
    /// fail with a stall (`LIBUSB_ERROR_PIPE`) until it clears the halt. Works while no response
    /// is being written (the controller refuses to halt an IN endpoint with queued data).
    ///
    /// - Returns: whether the kernel reported the endpoint halted.
    @discardableResult
    public func haltInputEndpoint() -> Bool {
        let input = self.state.withLock { $0.input }
        guard input >= 0 else { return false }
        var byte: UInt8 = 0
        // I/O against an endpoint's direction halts it (FunctionFS answers EBADMSG).
        let result = read(input, &byte, 1)
        return result < 0 && errno == EBADMSG
    }

    /// Stalls the bulk OUT endpoint as soon as the host next enables the function, before a
    /// byte of the new link is read, for fault-injection tests: the host's first write on its
    /// fresh link then fails with a stall (`LIBUSB_ERROR_PIPE`) until it clears the halt, which
    /// the USB host transport does and then sends the same bytes again (nothing was sent).
    ///
    /// Armed rather than done at once: `ep2` always has a read queued while a link is idle,
    /// which FunctionFS completes rather than halts, and the host's open (it selects the
    /// interface's alternate setting) re-enables the endpoints, which clears any halt queued
    /// before it. The halt is logged at info level when it happens.
    public func haltOutputEndpointAfterNextEnable() {
        self.state.withLock { $0.outputHaltArmedAt = $0.generation }
    }

    // MARK: Set-up

    private func startIfNeeded() throws(TransportError) {
        let (started, startError) = self.state.withLock { ($0.started, $0.startError) }
        if let startError { throw TransportError(.openFailed, startError) }
        if started { return }
        let control = Glibc.open(self.directory + "/ep0", O_RDWR | O_CLOEXEC)
        guard control >= 0 else {
            let reason = String(cString: strerror(errno))
            let code: TransportError.Code =
                errno == ENOENT ? .deviceNotFound : (errno == EACCES ? .permissionDenied : .openFailed)
            throw TransportError(
                code,
                "cannot open \(self.directory)/ep0: \(reason) (mount functionfs there first: scripts/usb-gadget setup; see docs/usb.md)"
            )
        }
        for blob in [self.configuration.descriptors.descriptorBlob, self.configuration.descriptors.stringsBlob] {
            let written = blob.withUnsafeBytes { write(control, $0.baseAddress, $0.count) }
            guard written == blob.count else {
                let reason = written < 0 ? String(cString: strerror(errno)) : "short write"
                _ = close(control)
                throw TransportError(
                    .openFailed,
                    "writing the USB descriptors to \(self.directory)/ep0 failed: \(reason) (is another program serving this function?)"
                )
            }
        }
        let input = Glibc.open(self.directory + "/" + FunctionFSDescriptors.inputEndpointFile, O_RDWR | O_CLOEXEC)
        let output = Glibc.open(self.directory + "/" + FunctionFSDescriptors.outputEndpointFile, O_RDWR | O_CLOEXEC)
        guard input >= 0, output >= 0 else {
            let reason = String(cString: strerror(errno))
            if input >= 0 { _ = close(input) }
            if output >= 0 { _ = close(output) }
            _ = close(control)
            throw TransportError(.openFailed, "cannot open the endpoints in \(self.directory): \(reason)")
        }
        self.state.withLock { state in
            state.started = true
            state.control = control
            state.input = input
            state.output = output
        }
        do {
            try DetachedThread.start { self.runControl(control) }
            try DetachedThread.start { self.runHostToDevice(output) }
            try DetachedThread.start { self.runDeviceToHost(input) }
        } catch {
            self.state.withLock { $0.startError = "could not start the FunctionFS threads: errno \(error.rawValue)" }
            throw TransportError(.openFailed, "could not start the FunctionFS threads: errno \(error.rawValue)")
        }
    }
}
