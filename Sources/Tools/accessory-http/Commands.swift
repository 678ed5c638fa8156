import AccessoryClient
import AccessoryEmulator
import AccessoryHTTP1
import AccessoryResponder
import AccessoryTLS
import AccessoryTransport
import ArgumentParser
import HTTPTypes
import NIOCore
import NIOPosix
import Synchronization

@main
struct AccessoryHTTPCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accessory-http",
        abstract: "HTTP/1.1 to accessories over USB, serial lines, pipes and sockets.",
        discussion: """
            Examples:
              accessory-http --device emulator get /status
              accessory-http --device serial:/dev/ttyACM0?baud=115200 -v get /status
              accessory-http --device 'exec:ssh pi socat - /dev/ttyGS0' post /config -d @config.json
              accessory-http serve --device unix:/tmp/accessory.sock
              accessory-http bridge --device usb:1209:0001 --listen unix:/run/accessory-http/accessory.sock

            Exit status: 0 success, 1 other failure, 22 HTTP status >= 400 with --fail, \
            64 usage error, 69 transport failure, 74 local file error, 75 timeout, \
            76 protocol error from the device.
            """,
        version: BuildInfo.versionLine,
        subcommands: [
            Get.self, Head.self, Delete.self, Post.self, Put.self, Request.self, Download.self, Serve.self, Trust.self,
            ServeGadget.self, List.self, Bridge.self, Status.self,
        ]
    )

    @OptionGroup var globals: GlobalOptions

    /// The entry point: the standard descriptors are made safe to write
    /// (``StandardDescriptors/reserve()``) before anything opens one, then ArgumentParser's
    /// `main` parses and runs the command.
    static func main() async {
        StandardDescriptors.reserve()
        await Self.main(nil)
    }
}

/// Runs a command body, turning a `CLIError` into its message on stderr and its exit code, and
/// cancelling the work on SIGINT/SIGTERM so links and serial lines are closed cleanly.
///
/// With `shutdown` (a responder's), the first signal begins it instead: the links end gracefully
/// (the answers under way are finished, an HTTP/2 connection sends GOAWAY), and the work is
/// cancelled once no link is served any more, or `grace` later; a second signal cancels at once.
func runReportingErrors(
    shutdown: ResponderShutdown? = nil,
    grace: Duration = .zero,
    _ body: @escaping @Sendable () async throws -> Void
) async throws {
    // The watcher first: a signal that came after the work started but before the watcher took
    // over SIGINT would kill the process outright (the default action), leaving a serial line's
    // settings changed and a temporary download file behind.
    let work = CancellableWork()
    let signals = SignalWatcher {
        // A stderr nobody reads must not hold up the stop (nor the graceful end of a responder).
        StandardError.stopWaiting()
        // Without a responder, or at the second signal (SIGINT after SIGTERM): stop now.
        guard let shutdown, !shutdown.hasBegun else {
            work.cancel()
            return
        }
        shutdown.begin()
        Task {
            // What is left once the links ended (a wait for the next host) is cancelled.
            _ = await shutdown.linksEnded(within: grace)
            work.cancel()
        }
    }
    defer { signals.stop() }
    let task = Task { try await body() }
    work.start(task)
    do {
        try await task.value
    } catch let error as CLIError {
        // RequestRunner turns a cancelled exchange into a CLIError too; after SIGINT/SIGTERM
        // that is an interruption, not a failure.
        if task.isCancelled {
            StandardError.write("accessory-http: interrupted\n", grace: StandardError.lastMessageGrace)
            throw ExitCode(130)
        }
        StandardError.write("accessory-http: \(error.message)\n", grace: StandardError.lastMessageGrace)
        throw error.status.exitCode
    } catch is CancellationError {
        StandardError.write("accessory-http: interrupted\n", grace: StandardError.lastMessageGrace)
        throw ExitCode(130)
    } catch let error as AccessoryClientError {
        if error.code == .cancelled && task.isCancelled {
            StandardError.write("accessory-http: interrupted\n", grace: StandardError.lastMessageGrace)
            throw ExitCode(130)
        }
        StandardError.write("accessory-http: \(error.message)\n", grace: StandardError.lastMessageGrace)
        throw ExitStatus(for: error).exitCode
    } catch let error as TransportError {
        StandardError.write("accessory-http: \(error.message)\n", grace: StandardError.lastMessageGrace)
        throw (error.code == .invalidDeviceSpec ? ExitStatus.usage : ExitStatus.transport).exitCode
    } catch let error as ResponderError {
        StandardError.write("accessory-http: \(error.message)\n", grace: StandardError.lastMessageGrace)
        throw (error.code == .setupFailed ? ExitStatus.transport : ExitStatus.failure).exitCode
    } catch {
        StandardError.write("accessory-http: \(error)\n", grace: StandardError.lastMessageGrace)
        throw ExitStatus.failure.exitCode
    }
}

/// A command that sends one request with a fixed method: the options and the run are shared.
protocol MethodCommand: AsyncParsableCommand {
    static var method: HTTPRequest.Method { get }
    /// Whether stderr shows a progress bar (only `download`).
    static var showsProgress: Bool { get }
    var globals: GlobalOptions { get }
    var request: RequestOptions { get }
    var path: String { get }
}

extension MethodCommand {
    static var showsProgress: Bool { false }

    func run() async throws {
        let runner = RequestRunner(globals: self.globals, options: self.request)
        let path = self.path
        try await runReportingErrors {
            try await runner.run(method: Self.method, path: path, progressBar: Self.showsProgress)
        }
    }
}

struct Get: MethodCommand {
    static let configuration = CommandConfiguration(abstract: "Send a GET request and print the body.")
    static let method = HTTPRequest.Method.get
    @OptionGroup var globals: GlobalOptions
    @OptionGroup var request: RequestOptions
    @Argument(help: "The path, e.g. /status (or accessory://NAME/path).") var path: String

    func validate() throws {
        if request.data != nil {
            throw ValidationError("get sends no body; use post, put or request -X METHOD with -d")
        }
    }
}

struct Head: MethodCommand {
    static let configuration = CommandConfiguration(abstract: "Send a HEAD request and print the response head.")
    static let method = HTTPRequest.Method.head
    @OptionGroup var globals: GlobalOptions
    @OptionGroup var request: RequestOptions
    @Argument(help: "The path.") var path: String
}

struct Delete: MethodCommand {
    static let configuration = CommandConfiguration(abstract: "Send a DELETE request.")
    static let method = HTTPRequest.Method.delete
    @OptionGroup var globals: GlobalOptions
    @OptionGroup var request: RequestOptions
    @Argument(help: "The path.") var path: String
}

struct Post: MethodCommand {
    static let configuration = CommandConfiguration(abstract: "Send a POST request with the body from -d.")
    static let method = HTTPRequest.Method.post
    @OptionGroup var globals: GlobalOptions
    @OptionGroup var request: RequestOptions
    @Argument(help: "The path.") var path: String
}

struct Put: MethodCommand {
    static let configuration = CommandConfiguration(abstract: "Send a PUT request with the body from -d.")
    static let method = HTTPRequest.Method.put
    @OptionGroup var globals: GlobalOptions
    @OptionGroup var request: RequestOptions
    @Argument(help: "The path.") var path: String
}

struct Request: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Send a request with any method (-X).")
    @OptionGroup var globals: GlobalOptions
    @OptionGroup var request: RequestOptions
    @Option(
        name: [.customShort("X"), .customLong("request")],
        help: ArgumentHelp("The method, e.g. PATCH.", valueName: "method")
    )
    var method: String
    @Argument(help: "The path.") var path: String

    func validate() throws {
        guard HTTPRequest.Method(method) != nil else {
            throw ValidationError("-X \(method) is not a valid method (a token such as GET, PATCH, REPORT)")
        }
    }

    func run() async throws {
        let runner = RequestRunner(globals: globals, options: request)
        let (path, method) = (self.path, HTTPRequest.Method(self.method) ?? .get)
        try await runReportingErrors { try await runner.run(method: method, path: path) }
    }
}

struct Download: MethodCommand {
    static let configuration = CommandConfiguration(
        abstract: "Download a body to a file, with a progress bar when stderr is a terminal."
    )
    static let method = HTTPRequest.Method.get
    static let showsProgress = true
    @OptionGroup var globals: GlobalOptions
    @OptionGroup var request: RequestOptions
    @Argument(help: "The path.") var path: String

    func validate() throws {
        if request.output == nil { throw ValidationError("download needs -o FILE") }
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve the emulated accessory on a byte stream pair.",
        discussion: """
            unix:PATH listens on a socket (each connection is a link); serial:PATH, exec:COMMAND and \
            stdio serve one link. Together with socat, a pty, ssh or a second machine stands in for \
            real hardware, e.g.:
              socat PTY,link=/tmp/acc-host,raw PTY,link=/tmp/acc-dev,raw &
              accessory-http serve --device serial:/tmp/acc-dev &
              accessory-http --device serial:/tmp/acc-host get /status
            """
    )
    @OptionGroup var globals: GlobalOptions
    @OptionGroup var limits: ResponderOptions

    @Option(
        name: .long,
        help: ArgumentHelp(
            "unix:PATH only: the socket file's mode, in octal (default 0660: owner and group may connect).",
            valueName: "mode"
        )
    )
    var socketMode: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "unix:PATH only: the socket file's group (a name or a numeric gid); you must be a member, or root.",
            valueName: "group"
        )
    )
    var socketGroup: String?

    func validate() throws {
        if let socketMode { _ = try SocketAccess.parseMode(socketMode) }
        if let socketGroup { _ = try SocketAccess.parseGroup(socketGroup) }
    }

    func run() async throws {
        let globals = self.globals
        let socketMode = self.socketMode
        let socketGroup = self.socketGroup
        let configuration = self.limits.makeConfiguration()
        let responder = EmulatedAccessory().makeResponder(configuration: configuration)
        // A second for the close itself after the connections' own grace.
        try await runReportingErrors(shutdown: responder.shutdown, grace: configuration.shutdownGrace + .seconds(1)) {
            let (spec, _) = try globals.resolveDevice()
            let group = MultiThreadedEventLoopGroup.singleton
            let tls = try globals.tls.serverConfiguration()
            switch spec.kind {
            case .emulator:
                throw CLIError(
                    .usage,
                    "serve needs a byte stream to serve on: unix:PATH, serial:PATH, exec:COMMAND or stdio"
                )
            case .unix(let path):
                let access = try SocketAccess(mode: socketMode, group: socketGroup)
                if globals.verbose { StandardError.write("* serving the emulated accessory on unix:\(path)\n") }
                // The socket file is made 0600 (umask 0177) at bind, so that until its mode and
                // group are set nobody else can connect; nothing else in serve creates files.
                let previousUmask = umask(0o177)
                var restored = false
                defer { if !restored { umask(previousUmask) } }
                try await responder.serveUnixSocket(
                    path: path,
                    group: group,
                    whenBound: { path in
                        umask(previousUmask)
                        try access.apply(to: path)
                    },
                    channelInitializer: try tls.map { try Self.tlsInitializer($0) }
                )
                restored = true
            default:
                if socketMode != nil || socketGroup != nil {
                    throw CLIError(
                        .usage,
                        "--socket-mode and --socket-group apply to serve --device unix:PATH only, not to \(spec)"
                    )
                }
                // The responder always accepts sessions (docs/framing.md §6): link options are
                // the host's choice, not the device's.
                if spec.kind == .stdio { try StandardDescriptors.requireStdioLink() }
                var transport = try GlobalOptions.clientTransport(for: DeviceSpec(spec.kind))
                if var stdio = transport as? StdioTransport {
                    // `printf 'GET …' | serve --device stdio` (or a client behind socat that
                    // half-closes) gets its answer before the link ends.
                    stdio.allowsHalfClose = true
                    transport = stdio
                }
                // TLS inside the session layer: every session is a TLS connection of its own
                // (and a host without sessions gets one for its one stream).
                let streamLayer = try tls.map { try Self.tlsStreamLayer($0) }
                if globals.verbose {
                    StandardError.write("* serving the emulated accessory on \(tls == nil ? "" : "tls+")\(transport)\n")
                }
                try await responder.serve(transport: transport, on: group.next(), streamLayer: streamLayer)
            }
        }
    }
}

/// The mode and group `serve --device unix:PATH` gives its socket file (connecting to a unix
/// socket needs write permission on it).
struct SocketAccess: Sendable {
    var mode: mode_t
    var group: gid_t?

    init(mode: String?, group: String?) throws(CLIError) {
        do {
            self.mode = try mode.map(Self.parseMode) ?? 0o660
            self.group = try group.map(Self.parseGroup)
        } catch {
            throw CLIError(.usage, "\(error)")
        }
    }

    /// An octal mode such as 0600, 660 or 0666; no bits beyond 0777.
    static func parseMode(_ text: String) throws -> mode_t {
        guard !text.isEmpty, text.count <= 4, text.allSatisfy({ ("0"..."7").contains($0) }),
            let mode = mode_t(text, radix: 8), mode <= 0o777
        else {
            throw ValidationError(
                "--socket-mode \(text) is not a file mode: give it in octal, at most 0777, e.g. 0660 (owner and group) or 0600 (owner only)"
            )
        }
        return mode
    }

    /// A group name (looked up in the group database) or a numeric gid.
    static func parseGroup(_ text: String) throws -> gid_t {
        if !text.isEmpty, text.allSatisfy(\.isASCII), text.allSatisfy(\.isNumber), let gid = gid_t(text) { return gid }
        var entry = Glibc.group()
        var result: UnsafeMutablePointer<Glibc.group>? = nil
        var buffer = [CChar](repeating: 0, count: 16 * 1024)
        let status = getgrnam_r(text, &entry, &buffer, buffer.count, &result)
        guard status == 0, result != nil else {
            throw ValidationError(
                "--socket-group \(text): no such group; give a group name from /etc/group (getent group) or a numeric gid"
            )
        }
        return entry.gr_gid
    }

    /// Sets the group (if any), then the mode, of the socket file at `path`.
    func apply(to path: String) throws(CLIError) {
        if let group = self.group, chown(path, uid_t.max, group) != 0 {
            let reason = String(cString: strerror(errno))
            throw CLIError(
                .failure,
                "cannot give the socket \(path) to group \(group): \(reason); you must be a member of that group (or root)"
            )
        }
        if chmod(path, self.mode) != 0 {
            let reason = String(cString: strerror(errno))
            throw CLIError(
                .failure,
                "cannot set the mode of the socket \(path) to \(String(self.mode, radix: 8)): \(reason)"
            )
        }
    }
}

extension Serve {
    static func tlsStreamLayer(_ configuration: TLSConfiguration) throws(CLIError) -> ResponderStreamLayer {
        let context: TLSServerContext
        do {
            context = try TLSServerContext(configuration: configuration)
        } catch {
            throw CLIError(.usage, error.message)
        }
        return { channel in [try context.addHandler(to: channel)] }
    }

    static func tlsInitializer(_ configuration: TLSConfiguration) throws(CLIError)
        -> @Sendable (any Channel) -> EventLoopFuture<Void>
    {
        do {
            return try TLSServerContext(configuration: configuration).channelInitializer
        } catch {
            throw CLIError(.usage, error.message)
        }
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A task that a signal may cancel before it exists: the cancel is kept and applied on start.
private final class CancellableWork: Sendable {
    private let state = TrackedMutex<(task: Task<Void, any Error>?, cancelled: Bool)>((nil, false))

    func cancel() {
        let task = self.state.withLock { state in
            state.cancelled = true
            return state.task
        }
        task?.cancel()
    }

    func start(_ task: Task<Void, any Error>) {
        let cancelled = self.state.withLock { state in
            state.task = task
            return state.cancelled
        }
        if cancelled { task.cancel() }
    }
}
