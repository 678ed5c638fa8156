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

            Exit status: 0 success, 1 other failure, 22 HTTP status >= 400 with --fail,
            64 usage error, 69 transport failure, 74 local file error, 75 timeout,
            76 protocol error from the device.
            """,
        version: AccessoryClient.version,
        subcommands: [
            Get.self, Head.self, Delete.self, Post.self, Put.self, Request.self, Download.self, Serve.self, Trust.self,
            ServeGadget.self, List.self,
        ]
    )

    @OptionGroup var globals: GlobalOptions
}

/// Runs a command body, turning a `CLIError` into its message on stderr and its exit code, and
/// cancelling the work on SIGINT/SIGTERM so links and serial lines are closed cleanly.
func runReportingErrors(_ body: @escaping @Sendable () async throws -> Void) async throws {
    let task = Task { try await body() }
    let signals = SignalWatcher { task.cancel() }
    defer { signals.stop() }
    do {
        try await task.value
    } catch let error as CLIError {
        // RequestRunner turns a cancelled exchange into a CLIError too; after SIGINT/SIGTERM
        // that is an interruption, not a failure.
        if task.isCancelled {
            StandardError.write("accessory-http: interrupted\n")
            throw ExitCode(130)
        }
        StandardError.write("accessory-http: \(error.message)\n")
        throw error.status.exitCode
    } catch is CancellationError {
        StandardError.write("accessory-http: interrupted\n")
        throw ExitCode(130)
    } catch let error as AccessoryClientError {
        if error.code == .cancelled && task.isCancelled {
            StandardError.write("accessory-http: interrupted\n")
            throw ExitCode(130)
        }
        StandardError.write("accessory-http: \(error.message)\n")
        throw ExitStatus(for: error).exitCode
    } catch let error as TransportError {
        StandardError.write("accessory-http: \(error.message)\n")
        throw (error.code == .invalidDeviceSpec ? ExitStatus.usage : ExitStatus.transport).exitCode
    } catch let error as ResponderError {
        StandardError.write("accessory-http: \(error.message)\n")
        throw (error.code == .setupFailed ? ExitStatus.transport : ExitStatus.failure).exitCode
    } catch {
        StandardError.write("accessory-http: \(error)\n")
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
            unix:PATH listens on a socket (each connection is a link); serial:PATH, exec:COMMAND and
            stdio serve one link. Together with socat, a pty, ssh or a second machine stands in for
            real hardware, e.g.:
              socat PTY,link=/tmp/acc-host,raw PTY,link=/tmp/acc-dev,raw &
              accessory-http serve --device serial:/tmp/acc-dev &
              accessory-http --device serial:/tmp/acc-host get /status
            """
    )
    @OptionGroup var globals: GlobalOptions

    func run() async throws {
        let globals = self.globals
        try await runReportingErrors {
            let (spec, _) = try globals.resolveDevice()
            let responder = EmulatedAccessory().makeResponder()
            let group = MultiThreadedEventLoopGroup.singleton
            let tls = try globals.tls.serverConfiguration()
            switch spec {
            case .emulator:
                throw CLIError(
                    .usage,
                    "serve needs a byte stream to serve on: unix:PATH, serial:PATH, exec:COMMAND or stdio"
                )
            case .unix(let path):
                if globals.verbose { StandardError.write("* serving the emulated accessory on unix:\(path)\n") }
                try await responder.serveUnixSocket(
                    path: path,
                    group: group,
                    channelInitializer: try tls.map { try Self.tlsInitializer($0) }
                )
            default:
                let plain = try GlobalOptions.clientTransport(for: spec)
                let transport: any ByteStreamTransport =
                    tls.map { TLSTransport(wrapping: plain, configuration: $0) } ?? plain
                if globals.verbose { StandardError.write("* serving the emulated accessory on \(transport)\n") }
                try await responder.serve(transport: transport, on: group.next())
            }
        }
    }
}

extension Serve {
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
