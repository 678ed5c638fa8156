import AccessoryBridge
import AccessoryTransport
import ArgumentParser
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show what a running bridge is doing: its accessory, link, requests, errors.",
        discussion: """
            Reads GET /.well-known/accessory-http/status from the bridge's listener:
              accessory-http status --bridge unix:/run/accessory-http/1209:0001.sock
              accessory-http status --bridge tcp:127.0.0.1:8080 --json
            """
    )

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The bridge's listener: unix:PATH or tcp:HOST:PORT (default $ACCESSORY_HTTP_BRIDGE, else unix:/run/accessory-http/accessory.sock).",
            valueName: "listener"
        )
    )
    var bridge: String?

    @Flag(name: .long, help: "Print the status document as it came (JSON).")
    var json = false

    func run() async throws {
        let text = self.bridge ?? Environment()["ACCESSORY_HTTP_BRIDGE"] ?? "unix:/run/accessory-http/accessory.sock"
        let json = self.json
        try await runReportingErrors {
            let listener: BridgeListener
            do {
                listener = try BridgeListener(parsing: text)
            } catch let error as BridgeError {
                throw CLIError(.usage, error.message)
            }
            let body = try await StatusFetch.fetch(from: listener)
            if json {
                try StandardOutput.write(body.hasSuffix("\n") ? body : body + "\n")
            } else {
                try StandardOutput.write(StatusFetch.render(body))
            }
        }
    }
}

/// One `GET` of the status document over a bridge's listener, with NIO's HTTP/1.1 client codec.
enum StatusFetch {
    static func fetch(from listener: BridgeListener) async throws -> String {
        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(5))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                }
            }
        let channel: any Channel
        do {
            switch listener {
            case .unix(let path): channel = try await bootstrap.connect(unixDomainSocketPath: path).get()
            case .tcp(let host, let port): channel = try await bootstrap.connect(host: host, port: port).get()
            case .inherited: throw CLIError(.usage, "--bridge takes unix:PATH or tcp:HOST:PORT")
            }
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError(
                .transport,
                "no bridge answers on \(listener): \(error) (is accessory-http bridge running there? try systemctl status 'accessory-http-bridge@*')"
            )
        }
        let collector = StatusCollector(promise: channel.eventLoop.makePromise())
        try await channel.pipeline.addHandler(collector).get()
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/.well-known/accessory-http/status")
        head.headers.add(name: "Host", value: "bridge")
        head.headers.add(name: "Connection", value: "close")
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        try await channel.writeAndFlush(HTTPClientRequestPart.end(nil)).get()
        let result = try await collector.promise.futureResult.get()
        channel.close(promise: nil)
        guard result.status == .ok else {
            throw CLIError(
                .protocolError,
                "\(listener) answered \(result.status.code) to the status request: is it an accessory-http bridge?"
            )
        }
        return result.body
    }

    /// The status document as lines for people.
    static func render(_ document: String) -> String {
        guard let data = document.data(using: .utf8),
            let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let accessories = root["accessories"] as? [[String: Any]]
        else { return document + "\n" }
        var lines: [String] = []
        for accessory in accessories {
            let link = accessory["link"] as? [String: Any] ?? [:]
            lines.append("\(accessory["name"] ?? "?") (\(accessory["device"] ?? "?"))")
            let count = (link["count"] as? Int).map { $0 > 1 ? "\($0) links, " : "" } ?? ""
            lines.append(
                "  link: \(count)opened \(link["opens"] ?? 0) times, \(link["renewals"] ?? 0) restarts in band"
            )
            lines.append(
                "  requests: \(accessory["requests"] ?? 0) answered, \(accessory["active"] ?? 0) on the link, \(accessory["queued"] ?? 0) waiting"
            )
            lines.append(
                "  bytes: \(accessory["bytesToAccessory"] ?? 0) to the accessory, \(accessory["bytesFromAccessory"] ?? 0) from it"
            )
            if let errors = accessory["errors"] as? [String: Any], !errors.isEmpty {
                lines.append(
                    "  errors: " + errors.keys.sorted().map { "\($0) \(errors[$0] ?? 0)" }.joined(separator: ", ")
                )
            }
            if let last = accessory["lastError"] as? String { lines.append("  last error: \(last)") }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

/// Collects one response's status and body.
private final class StatusCollector: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTPClientResponsePart
    struct Result: Sendable {
        var status: HTTPResponseStatus
        var body: String
    }

    let promise: EventLoopPromise<Result>
    private let partial = TrackedMutex(Result(status: .ok, body: ""))

    init(promise: EventLoopPromise<Result>) {
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head): self.partial.withLock { $0.status = head.status }
        case .body(let buffer): self.partial.withLock { $0.body += String(buffer: buffer) }
        case .end: self.promise.succeed(self.partial.withLock { $0 })
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.promise.fail(CLIError(.protocolError, "the bridge closed the connection before the status document ended"))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.promise.fail(error)
        context.close(promise: nil)
    }
}
