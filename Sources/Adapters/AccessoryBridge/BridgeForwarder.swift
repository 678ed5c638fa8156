import AccessoryClient
import AccessoryHTTP1
import AccessoryTransport
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

typealias BridgeOutbound = NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>

/// Forwards one client request to the accessory through the native client and its answer back,
/// or answers it itself (status, refusals, errors the client can act on).
struct BridgeForwarder: Sendable {
    /// The path of the status document on every listener.
    static let statusPath = "/.well-known/accessory-http/status"

    let pool: BridgeClientPool
    let configuration: AccessoryBridge.Configuration
    let admission: BridgeAdmission
    let statistics: BridgeStatistics
    let logger: Logger
    let status: @Sendable () -> BridgeStatus

    /// What became of an exchange, for the connection.
    struct Outcome {
        /// The connection can carry another request.
        var keepAlive: Bool
    }

    /// How far an exchange got, shared by its tasks.
    private final class Progress: Sendable {
        struct Counts {
            var headArrived = false
            /// When the client last gave the link a part of its body: the response timeout
            /// counts from then, so a long upload is not taken for a silent accessory.
            var lastBodyProgress = ContinuousClock.now
            var headSent = false
            var endSent = false
            var bytesIn = 0
            var bytesOut = 0
            var status = 0
            var closeAfter = false
        }
        let counts = TrackedMutex(Counts())
        var snapshot: Counts { self.counts.withLock { $0 } }
    }

    /// The client went away while the bridge wrote to it.
    private struct ClientGone: Error {
        let underlying: any Error
    }

    /// The accessory did not send a response head within the response timeout.
    private struct ResponseTimeout: Error {}

    func forward(
        _ head: HTTPRequestHead,
        body relay: RequestBodyRelay?,
        outbound: BridgeOutbound,
        peer: String
    ) async -> Outcome {
        let started = ContinuousClock.now
        let forHEAD = head.method == .HEAD
        let clientKeepAlive = head.isKeepAlive
        var bytesIn = 0
        var bytesOut = 0
        var status = 0
        defer {
            self.statistics.answered(status)
            let milliseconds =
                (ContinuousClock.now - started).components.attoseconds / 1_000_000_000_000_000
                + (ContinuousClock.now - started).components.seconds * 1000
            self.logger.info(
                "\(head.method.rawValue) \(head.uri) \(status == 0 ? "-" : String(status)) \(bytesOut) B \(milliseconds) ms",
                metadata: ["peer": "\(peer)", "bytes-in": "\(bytesIn)"]
            )
        }

        // Requests the bridge answers itself.
        if let answer = self.ownAnswer(to: head) {
            status = Int(answer.status.code)
            // A refused CONNECT's client expected a tunnel: the connection is not reused. Nor
            // is one whose request carried a body (even to the status document): nothing takes
            // that body, and the connection's next request would wait behind it.
            relay?.close()
            let close = !clientKeepAlive || head.method == .CONNECT || relay != nil
            if let kind = answer.errorKind {
                let message =
                    head.method == .CONNECT ? "CONNECT refused: the bridge is not a proxy" : answer.body.trimmed
                self.statistics.failed(kind, message)
            }
            let written = await self.write(answer, version: head.version, close: close, forHEAD: forHEAD, outbound)
            return Outcome(keepAlive: written && !close)
        }

        guard await self.admission.acquire(timeout: self.configuration.queueTimeout) else {
            let seconds = max(1, Int(self.configuration.queueTimeout.components.seconds))
            var answer = BridgeResponse.error(
                .serviceUnavailable,
                kind: "queue-timeout",
                "the accessory \(self.configuration.name) stayed busy with other requests for \(seconds) s; try again later"
            )
            answer.extraHeaders = [("Retry-After", String(self.configuration.retryAfterSeconds))]
            status = 503
            self.statistics.failed("queue-timeout", answer.body.trimmed)
            relay?.close()
            let close = !clientKeepAlive || relay != nil
            let written = await self.write(answer, version: head.version, close: close, forHEAD: forHEAD, outbound)
            return Outcome(keepAlive: written && !close)
        }
        defer { self.admission.release() }

        let progress = Progress()
        let request = self.accessoryRequest(for: head, relay: relay, progress: progress)
        do {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    try await self.pool.withClient { client in
                        try await client.execute(request) { response in
                            progress.counts.withLock { $0.headArrived = true }
                            var (responseHead, closeAfter, chunked) = ProxyHeaders.responseHead(
                                response.head,
                                forHEAD: forHEAD,
                                clientVersion: head.version
                            )
                            let close = closeAfter || !clientKeepAlive
                            if close { responseHead.headers.replaceOrAdd(name: "Connection", value: "close") }
                            progress.counts.withLock {
                                $0.status = Int(responseHead.status.code)
                                $0.closeAfter = close
                            }
                            try await Self.send(.head(responseHead), outbound)
                            progress.counts.withLock { $0.headSent = true }
                            for try await part in response.body where !forHEAD {
                                let count = part.readableBytes
                                try await Self.send(.body(.byteBuffer(part)), outbound)
                                progress.counts.withLock { $0.bytesOut += count }
                            }
                            // Trailers can follow only a chunked answer (ProxyHeaders keeps an answer
                            // that announces them chunked); an HTTP/1.0 client gets none.
                            let trailers = chunked ? response.body.trailers.map(ProxyHeaders.trailerHeaders) : nil
                            try await Self.send(.end(trailers), outbound)
                            progress.counts.withLock { $0.endSent = true }
                        }
                    }
                    return true
                }
                group.addTask {
                    // The watchdog: the accessory must start its answer within the timeout of
                    // the request's last body byte.
                    while true {
                        let counts = progress.snapshot
                        if counts.headArrived { return false }
                        let deadline = counts.lastBodyProgress + self.configuration.responseTimeout
                        if ContinuousClock.now >= deadline { throw ResponseTimeout() }
                        guard (try? await Task.sleep(until: deadline)) != nil else { return false }
                    }
                }
                for try await exchangeDone in group where exchangeDone {
                    group.cancelAll()
                }
            }
            relay?.close()
            let done = progress.snapshot
            (bytesIn, bytesOut, status) = (done.bytesIn, done.bytesOut, done.status)
            self.statistics.carried(toAccessory: bytesIn, fromAccessory: bytesOut)
            let bodyComplete = relay.map { $0.isFinished } ?? true
            return Outcome(keepAlive: !done.closeAfter && bodyComplete)
        } catch {
            relay?.close()
            let done = progress.snapshot
            (bytesIn, bytesOut, status) = (done.bytesIn, done.bytesOut, done.status)
            self.statistics.carried(toAccessory: bytesIn, fromAccessory: bytesOut)
            if done.endSent {
                // The whole answer went out; what failed after it (a cancellation as the client
                // closed) is no error of the exchange.
                return Outcome(keepAlive: false)
            }
            // The client's connection ended: a write to it failed, or the connection's reader
            // saw it close and cancelled this exchange (the link abandons it: drain, reset or
            // session restart).
            if error is ClientGone || Task.isCancelled {
                let why = (error as? ClientGone).map { ": \($0.underlying)" } ?? ""
                self.statistics.failed("client-gone", "the client \(peer) went away mid-exchange\(why)")
                return Outcome(keepAlive: false)
            }
            let answer = self.answer(for: error)
            self.statistics.failed(answer.errorKind ?? "accessory-unreachable", answer.body.trimmed)
            guard !done.headSent else {
                // The answer had begun: all the bridge can do is end the connection, so the
                // client sees the body cut short rather than a wrong one.
                self.logger.warning(
                    "\(head.method.rawValue) \(head.uri): the accessory's answer broke off: \(answer.body.trimmed)"
                )
                return Outcome(keepAlive: false)
            }
            status = Int(answer.status.code)
            let close = !clientKeepAlive || relay.map { !$0.isFinished } ?? false
            let written = await self.write(answer, version: head.version, close: close, forHEAD: forHEAD, outbound)
            return Outcome(keepAlive: written && !close)
        }
    }

    /// The status document, and the requests a gateway must refuse.
    private func ownAnswer(to head: HTTPRequestHead) -> BridgeResponse? {
        if head.method == .CONNECT {
            // No body: NIO's HTTP/1 server treats CONNECT as the start of a tunnel and would
            // hold a body back; the status line and the log say why.
            var answer = BridgeResponse.error(.methodNotAllowed, kind: "bad-request", "")
            answer.body = ""
            answer.extraHeaders = [("Allow", "GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH")]
            return answer
        }
        guard head.uri.hasPrefix("/") else {
            return .error(
                .badRequest,
                kind: "bad-request",
                "the request target \(head.uri.prefix(200)) is not a path: the bridge is not a proxy; send origin-form (GET /status HTTP/1.1)"
            )
        }
        if head.uri == Self.statusPath || head.uri.hasPrefix(Self.statusPath + "?") {
            guard head.method == .GET || head.method == .HEAD else {
                var answer = BridgeResponse.error(
                    .methodNotAllowed,
                    kind: "bad-request",
                    "the status document is read with GET"
                )
                answer.extraHeaders = [("Allow", "GET, HEAD")]
                return answer
            }
            return BridgeResponse(
                status: .ok,
                body: "{\"accessories\":[\(self.status().json)]}\n",
                contentType: "application/json"
            )
        }
        return nil
    }

    private func accessoryRequest(for head: HTTPRequestHead, relay: RequestBodyRelay?, progress: Progress)
        -> AccessoryRequest
    {
        let method = HTTPRequest.Method(head.method.rawValue) ?? .get
        var body = HTTPRequestBody.none
        if let relay {
            let length = head.headers["content-length"].first.flatMap { Int($0) }
            body = .stream(length: length) { writer in
                // The link has opened and sent the head: from here on, time without body
                // progress is the accessory's; before, it was the link's own open.
                progress.counts.withLock { $0.lastBodyProgress = .now }
                while let part = try await relay.next() {
                    let count = part.readableBytes
                    try await writer.write(part)
                    progress.counts.withLock {
                        $0.bytesIn += count
                        $0.lastBodyProgress = .now
                    }
                }
                // A chunked body's trailer fields go on with its end (a body with a length
                // cannot have had any).
                if let trailers = relay.trailers { try writer.setTrailers(trailers) }
            }
        }
        return AccessoryRequest(
            method: method,
            path: head.uri,
            headerFields: ProxyHeaders.requestFields(head.headers),
            body: body
        )
    }

    /// The client-facing answer for a failed exchange.
    private func answer(for error: any Error) -> BridgeResponse {
        if error is ResponseTimeout {
            return .error(
                .gatewayTimeout,
                kind: "accessory-timeout",
                "the accessory \(self.configuration.name) did not start its answer within \(self.configuration.responseTimeout)"
            )
        }
        guard let error = error as? AccessoryClientError else {
            return .error(
                .badGateway,
                kind: "accessory-unreachable",
                "the accessory \(self.configuration.name) failed: \(error)"
            )
        }
        switch error.code {
        case .timedOut:
            return .error(
                .gatewayTimeout,
                kind: "accessory-timeout",
                "the accessory \(self.configuration.name) was too slow: \(error.message)"
            )
        case .invalidRequest:
            return .error(
                .badRequest,
                kind: "bad-request",
                "the request cannot be sent to the accessory: \(error.message)"
            )
        case .shutDown, .cancelled:
            return .error(.serviceUnavailable, kind: "shutting-down", "the bridge is shutting down")
        default:
            return .error(
                .badGateway,
                kind: "accessory-unreachable",
                "the accessory \(self.configuration.name) could not answer: \(error.message)"
            )
        }
    }

    private static func send(_ part: HTTPServerResponsePart, _ outbound: BridgeOutbound) async throws {
        do {
            try await outbound.write(part)
        } catch {
            throw ClientGone(underlying: error)
        }
    }

    private func write(
        _ answer: BridgeResponse,
        version: HTTPVersion,
        close: Bool,
        forHEAD: Bool,
        _ outbound: BridgeOutbound
    ) async -> Bool {
        do {
            try await outbound.write(contentsOf: answer.parts(version: version, close: close, forHEAD: forHEAD))
            return true
        } catch {
            return false
        }
    }
}

extension String {
    fileprivate var trimmed: String {
        var text = Substring(self)
        while text.last?.isNewline == true { text = text.dropLast() }
        return String(text)
    }
}
