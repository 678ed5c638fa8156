import Logging
import NIOCore
import NIOHTTP1

typealias BridgeChannel = NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>

/// Serves one client connection: a reader task takes the client's requests (bodies through a
/// relay, with back-pressure) and a responder task forwards them in order. When either ends
/// (the client left, or the connection must close after an answer) the other is cancelled, so
/// an abandoned exchange is given up at once rather than when the next write fails.
struct BridgeConnection: Sendable {
    let forwarder: BridgeForwarder
    let peer: String
    let tracker: ConnectionTracker
    let id: Int

    /// The request body ended early: the client closed or sent something invalid.
    struct ClientClosed: Error, CustomStringConvertible {
        var description: String { "the client closed the connection before the request body ended" }
    }

    /// How one of the connection's two tasks ended.
    private enum Ending {
        /// The client closed its sending side: the requests it made are still answered.
        case clientClosed
        /// Reading from the client failed (a reset): nobody will read an answer.
        case clientFailed
        case responderDone
    }

    func run(_ channel: BridgeChannel) async {
        do {
            try await channel.executeThenClose { inbound, outbound in
                let (requests, queue) = AsyncStream<(HTTPRequestHead, RequestBodyRelay?)>.makeStream()
                // The channel closing under us is the client gone for good (on a unix socket a
                // peer that closed, or was killed, shows as a hang-up and NIO closes the channel;
                // a half-close only ends the input): its exchange is given up at once, instead
                // of holding the link until the device answers or the idle timeout.
                let (closed, closing) = AsyncStream<Never>.makeStream()
                channel.channel.closeFuture.whenComplete { _ in closing.finish() }
                await withTaskGroup(of: Ending.self) { group in
                    group.addTask { await self.read(inbound, into: queue, outbound: outbound) }
                    group.addTask {
                        for await _ in closed {}
                        return Task.isCancelled ? .responderDone : .clientFailed
                    }
                    group.addTask {
                        for await (head, relay) in requests {
                            guard self.tracker.begin(self.id) else { break }  // draining: no new exchange
                            let outcome = await self.forwarder.forward(
                                head,
                                body: relay,
                                outbound: outbound,
                                peer: self.peer
                            )
                            guard self.tracker.end(self.id), outcome.keepAlive else { break }
                        }
                        return .responderDone
                    }
                    while let ending = await group.next() {
                        if ending != .clientClosed { group.cancelAll() }
                    }
                }
            }
        } catch {
            self.forwarder.logger.debug("connection from \(self.peer) ended: \(error)")
        }
    }

    private func read(
        _ inbound: NIOAsyncChannelInboundStream<HTTPServerRequestPart>,
        into queue: AsyncStream<(HTTPRequestHead, RequestBodyRelay?)>.Continuation,
        outbound: BridgeOutbound
    ) async -> Ending {
        defer { queue.finish() }
        var relay: RequestBodyRelay?
        do {
            for try await part in inbound {
                switch part {
                case .head(let head):
                    relay = nil
                    if Self.hasBody(head) {
                        relay = RequestBodyRelay(beforeFirstPull: Self.continueSender(for: head, outbound))
                    }
                    queue.yield((head, relay))
                case .body(let buffer):
                    // A part the exchange no longer takes (it ended early) is dropped; the
                    // connection closes after that answer.
                    _ = await relay?.send(buffer)
                case .end(let trailers):
                    relay?.finish(trailers: trailers.map(ProxyHeaders.trailerFields))
                    relay = nil
                }
            }
            guard let relay else { return .clientClosed }
            relay.fail(ClientClosed())
            return .clientFailed
        } catch {
            relay?.fail(error)
            return .clientFailed
        }
    }

    /// For a request that expects `100 Continue`: sends it when the link first asks for the
    /// body (so a request refused before that is never sent in vain).
    private static func continueSender(
        for head: HTTPRequestHead,
        _ outbound: BridgeOutbound
    ) -> (@Sendable () async throws -> Void)? {
        guard head.headers["expect"].contains(where: { $0.lowercased() == "100-continue" }) else { return nil }
        let interim = HTTPResponseHead(version: head.version, status: .continue)
        return { try await outbound.write(HTTPServerResponsePart.head(interim)) }
    }

    /// Whether a request carries a body (RFC 9112 §6.3): `Transfer-Encoding`, or a
    /// `Content-Length` above 0.
    static func hasBody(_ head: HTTPRequestHead) -> Bool {
        if !head.headers["transfer-encoding"].isEmpty { return true }
        if let length = head.headers["content-length"].first, let value = Int(length) { return value > 0 }
        return false
    }
}
