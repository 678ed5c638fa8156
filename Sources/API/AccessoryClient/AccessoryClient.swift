import AccessoryHTTP1
import AccessoryHTTP2
import AccessoryTransport
import HTTPTypes
import NIOCore
import NIOPosix

/// The native client: sends HTTP requests to one accessory over a persistent link.
///
/// Requests may be made from many tasks at once; on an HTTP/1.1 link they are carried one at a
/// time, in order; on an HTTP/2 link (`LinkConfiguration.httpVersion`) each is a stream and they
/// run at once.
/// Redirects are followed (to the same accessory by default) and Basic or Digest
/// authentication is answered, so the caller sees only the final response.
///
/// ```swift
/// let client = AccessoryClient(transport: try DeviceSpec(parsing: "serial:/dev/ttyACM0").makeTransport())
/// let (response, body) = try await client.data(AccessoryRequest(path: "/status"))
/// ```
public final class AccessoryClient: Sendable {
    /// How a client behaves: the link below it, redirects, authentication, default header fields
    /// and timeout.
    public struct Configuration: Sendable {
        /// The link: Host header, limits, open and idle timeouts, drain bound, tracing.
        public var link = LinkConfiguration()
        /// How redirects are followed: by default up to ten, to the same accessory only.
        public var redirects = RedirectPolicy.default
        /// Asked for credentials when the device challenges and the request carries none.
        public var credentialProvider: (any CredentialProvider)?
        /// Header fields added to every request that does not set them itself.
        public var defaultHeaderFields: HTTPFields = [
            .userAgent: "accessory-http/\(AccessoryClient.version)"
        ]
        /// The whole-exchange timeout for requests that set none.
        public var defaultTimeout: Duration?

        /// The defaults: a default link (HTTP/1.1), ``RedirectPolicy/default``, no credential
        /// provider, a `User-Agent` naming this package and its ``AccessoryClient/version``, and
        /// no whole-exchange timeout.
        public init() {}
    }

    /// This package's version, as sent in the default `User-Agent` (`accessory-http/<version>`).
    public static let version = "0.1.0"

    /// The configuration the client was created with.
    public let configuration: Configuration
    /// The link underneath: package-only, so callers cannot bypass redirects, authentication
    /// and the client's policies by talking to it directly.
    package let link: HTTPLink
    /// The HTTP/2 connection, when the configuration asks for HTTP/2 (`http=2`): then every
    /// request is a stream of it, and requests from many tasks run at once.
    package let http2: HTTP2Link?

    /// The link's event loop as a task executor. Requests made from a task that prefers it
    /// (`withTaskExecutorPreference(client.taskExecutor) { … }`) run without any thread hop:
    /// the lowest latency for many small requests. Code running with that preference must not
    /// block, since the event loop serves the link meanwhile.
    public var taskExecutor: EventLoopTaskExecutor {
        // The executor the exchanges themselves run on: another instance on the same loop would
        // still cost an enqueue per exchange.
        self.http2?.taskExecutor ?? self.link.taskExecutor
    }

    /// A client whose link is not open yet: the first request opens it.
    ///
    /// - Parameters:
    ///   - transport: the byte stream pair to the accessory (see `DeviceSpec` for making one).
    ///   - configuration: how the client behaves; the defaults of ``Configuration/init()`` by
    ///     default. `link.httpVersion` chooses between HTTP/1.1 and HTTP/2.
    ///   - eventLoopGroup: the group whose next event loop runs the link;
    ///     `MultiThreadedEventLoopGroup.singleton` by default.
    public init(
        transport: any ByteStreamTransport,
        configuration: Configuration = .init(),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.configuration = configuration
        let eventLoop = eventLoopGroup.next()
        self.link = HTTPLink(transport: transport, configuration: configuration.link, eventLoop: eventLoop)
        self.http2 =
            configuration.link.httpVersion == .http2
            ? HTTP2Link(transport: transport, configuration: configuration.link, eventLoop: eventLoop) : nil
    }

    /// Closes the link's byte stream when no request uses it, and waits until the transport
    /// released the device (a serial port unlocked, USB interfaces released), so that another
    /// program can use it; the next request opens it again. Returns whether it was open.
    /// Requests in progress on an HTTP/1.1 link are waited for; on HTTP/2, call it when none run.
    public func releaseTransport() async -> Bool {
        if let http2 = self.http2 { return await http2.releaseTransport() }
        return await self.link.releaseTransport()
    }

    /// Closes the link. Requests after this fail with `.shutDown`.
    public func shutdown() async {
        await self.http2?.shutdown()
        await self.link.shutdown()
    }

    // MARK: Execute

    /// Sends `request` and hands the final response to `handle`, which may stream its body.
    /// When `handle` returns, any unread body is drained so the link stays in step.
    ///
    /// - Throws: what `handle` throws, unchanged; every other failure as ``AccessoryClientError``
    ///   (cancellation as code `.cancelled`, wherever it struck).
    public func execute<Result: Sendable>(
        _ request: AccessoryRequest,
        _ handle: (AccessoryResponse) async throws -> Result
    ) async throws -> Result {
        do {
            return try await self.run(request, handleIsLinkWork: false, handle)
        } catch let error as HandlerError {
            if error.underlying is CancellationError { throw AccessoryClientError.wrapping(error.underlying) }
            throw error.underlying
        } catch {
            throw AccessoryClientError.wrapping(error)
        }
    }

    /// Marks an error thrown by the caller's handler, so it is rethrown as it was.
    private struct HandlerError: Error {
        let underlying: any Error
    }

    /// Sends `request` and collects the whole response body (at most `maxBodySize` bytes).
    public func data(
        _ request: AccessoryRequest,
        maxBodySize: Int = 64 * 1024 * 1024
    ) async throws(AccessoryClientError) -> (HTTPResponse, ByteBuffer) {
        do {
            // Collecting is this client's own non-blocking work: the whole exchange runs on the
            // link's event loop (see `HTTPLink.execute(_:body:deadline:handleIsLinkWork:_:)`).
            return try await self.run(request, handleIsLinkWork: true) { response in
                (response.head, try await response.body.collect(upTo: maxBodySize))
            }
        } catch {
            throw AccessoryClientError.wrapping(error)
        }
    }

    /// Sends `GET target` and collects the whole response body: the shortest way to ask an
    /// accessory something (`try await client.get("/status")`).
    ///
    /// - Parameters:
    ///   - target: a path with an optional query, or an `accessory://` or `http://`
    ///     URL (see ``AccessoryRequest/init(method:url:)``).
    ///   - maxBodySize: the largest body collected, in bytes; 64 MiB by default. A larger one
    ///     fails with ``AccessoryClientError/Code/responseTooLarge``.
    public func get(
        _ target: String,
        maxBodySize: Int = 64 * 1024 * 1024
    ) async throws(AccessoryClientError) -> (HTTPResponse, ByteBuffer) {
        try await self.data(AccessoryRequest(url: target), maxBodySize: maxBodySize)
    }

    /// One exchange on the link this client speaks: an HTTP/2 stream, or the HTTP/1.1 link.
    private func exchange<Result: Sendable>(
        _ request: HTTPRequest,
        body: HTTPRequestBody,
        deadline: ContinuousClock.Instant?,
        handleIsLinkWork: Bool,
        _ handle: (HTTPLinkResponse) async throws -> Result
    ) async throws -> Result {
        if let http2 = self.http2 {
            return try await http2.execute(
                request,
                body: body,
                deadline: deadline,
                handleIsLinkWork: handleIsLinkWork,
                handle
            )
        }
        return try await self.link.execute(
            request,
            body: body,
            deadline: deadline,
            handleIsLinkWork: handleIsLinkWork,
            handle
        )
    }

    private enum Step<Final: Sendable>: Sendable {
        case final(Final)
        case follow(HTTPRequest, dropBody: Bool)
    }

    private func run<Result: Sendable>(
        _ request: AccessoryRequest,
        handleIsLinkWork: Bool,
        _ handle: (AccessoryResponse) async throws -> Result
    ) async throws -> Result {
        var current = try self.makeHTTPRequest(request)
        var body = request.body
        var redirects = RedirectState(policy: self.configuration.redirects, initialRequest: current)
        var authentication = AuthenticationState(
            credentials: request.credentials,
            provider: self.configuration.credentialProvider
        )
        let timeout = request.timeout ?? self.configuration.defaultTimeout
        let deadline = timeout.map { ContinuousClock.now.advanced(by: $0) }

        while true {
            let authorized = authentication.authorize(current)
            let hadBody = !body.isNone
            // The closure runs inside this task, before `execute` returns, so it may update the
            // redirect and authentication state directly.
            let step: Step<Result> = try await self.exchange(
                authorized,
                body: body,
                deadline: deadline,
                handleIsLinkWork: handleIsLinkWork
            ) { response in
                switch await authentication.next(request: authorized, response: response.head) {
                case .retry(let retried):
                    return .follow(retried, dropBody: false)
                case .done, .giveUp:
                    break
                }
                switch redirects.next(request: authorized, response: response.head, hadBody: hadBody) {
                case .follow(let next, let dropBody, _):
                    return .follow(next, dropBody: dropBody)
                case .fail(let failure):
                    throw AccessoryClientError(.redirectFailed, failure.description, underlying: failure)
                case .done:
                    let final = AccessoryResponse(
                        head: response.head,
                        body: response.body,
                        path: authorized.path ?? "/",
                        redirectCount: redirects.redirectCount
                    )
                    do {
                        return .final(try await handle(final))
                    } catch let error as AccessoryClientError {
                        throw error
                    } catch let error as HTTPLinkError {
                        throw error  // the body stream's own failure (idle timeout, link closed…)
                    } catch {
                        throw HandlerError(underlying: error)
                    }
                }
            }
            switch step {
            case .final(let result):
                return result
            case .follow(let next, let dropBody):
                current = next
                if dropBody { body = .none }
            }
        }
    }

    private func makeHTTPRequest(_ request: AccessoryRequest) throws -> HTTPRequest {
        try RequestValidation.validate(path: request.path)
        var fields = request.headerFields
        for field in self.configuration.defaultHeaderFields where fields[field.name] == nil {
            fields.append(field)
        }
        let http = HTTPRequest(
            method: request.method,
            scheme: nil,
            authority: self.configuration.link.host,
            path: request.path,
            headerFields: fields
        )
        // The rest of the request is checked once, by the link, before anything is written.
        return http
    }
}
