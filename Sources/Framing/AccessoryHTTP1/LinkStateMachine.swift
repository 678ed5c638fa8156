/// The rules of one HTTP/1.1 link, free of I/O: events go in, actions come out.
///
/// One exchange at a time. An exchange ends when both the request has been written and the
/// response has been read to its end (delivered, or drained after the caller abandoned it). The
/// link may carry the next exchange only if every byte of this one was accounted for and both
/// sides want to keep it alive; otherwise it is torn down and reopened, so that stale bytes are
/// never read as the next response.
///
/// The machine makes every decision the handler carries out (async-http-client's
/// `HTTP1ConnectionStateMachine` is the model): whether to read, what the link guard expects,
/// whether an abandoned response is drained or its stream closed, and
/// which error ends what. The handler only does the I/O an ``Action`` names.
struct LinkStateMachine {
    enum RequestProgress: Equatable {
        /// The head is written; body parts may follow.
        case writing
        /// The head asked for `100 Continue`; the body waits for it (or for a timeout).
        case waitingForContinue
        /// The request is complete on the wire.
        case done
    }

    enum ResponseProgress: Equatable {
        case awaitingHead
        /// Body parts go to the consumer.
        case body
        /// The consumer is gone; body parts are read and discarded.
        case draining(discarded: Int)
        case done
    }

    struct Exchange: Equatable {
        let id: UInt64
        let isHeadRequest: Bool
        var request: RequestProgress
        var response: ResponseProgress = .awaitingHead
        /// Whether the link may carry another exchange after this one.
        var keepAlive = true
        /// The consumer left before the response head arrived.
        var consumerGone = false
        /// Whether the consumer can take more of the body now (back-pressure).
        var consumerWantsMore = true
        /// The final head announced no body whatever its headers say (HEAD, 204, 304).
        var bodiless = false
        /// Informational (1xx) heads so far.
        var informational = 0
    }

    /// More 1xx heads than this before a final one is a device gone wrong, not a slow answer.
    static let maxInformationalResponses = 100

    enum State: Equatable {
        case idle
        case exchange(Exchange)
        /// The link must not be used again; the handler closes it.
        case broken
    }

    /// Fixed for the life of a link.
    struct Policy {
        var drainLimit: Int
        /// Close the stream of an abandoned response instead of draining it: the transport
        /// opens a fresh, independent stream cheaply (see
        /// `ByteStreamTransport.opensIndependentStreams`), while the rest of the response could
        /// take any time.
        var closesAbandonedStreams = false
    }

    private(set) var state: State = .idle
    let policy: Policy

    init(policy: Policy) {
        self.policy = policy
    }

    init(drainLimit: Int, closesAbandonedStreams: Bool = false) {
        self.init(policy: Policy(drainLimit: drainLimit, closesAbandonedStreams: closesAbandonedStreams))
    }

    var activeExchangeID: UInt64? {
        if case .exchange(let exchange) = self.state { return exchange.id }
        return nil
    }

    var isHeadRequest: Bool {
        if case .exchange(let exchange) = self.state { return exchange.isHeadRequest }
        return false
    }

    /// Whether the response in progress has no body by its nature (HEAD, 204, 304).
    var responseIsBodiless: Bool {
        if case .exchange(let exchange) = self.state { return exchange.bodiless }
        return false
    }

    /// Whether the link should read from the device now.
    var wantsBytes: Bool {
        switch self.state {
        case .idle:
            return true  // to notice stray bytes and the device closing the link
        case .broken:
            return false
        case .exchange(let exchange):
            if case .body = exchange.response { return exchange.consumerWantsMore }
            return true
        }
    }

    // MARK: Starting

    /// Starts an exchange (the guard then expects a status line). `false`: one is in progress,
    /// or the link is broken.
    mutating func startExchange(id: UInt64, isHeadRequest: Bool, expectsContinue: Bool) -> Bool {
        guard case .idle = self.state else { return false }
        self.state = .exchange(
            Exchange(id: id, isHeadRequest: isHeadRequest, request: expectsContinue ? .waitingForContinue : .writing)
        )
        return true
    }

    // MARK: Request side

    /// The continue timeout passed without a `100 Continue`: send the body anyway, as curl does.
    mutating func continueTimedOut(id: UInt64) -> Bool {
        guard case .exchange(var exchange) = self.state, exchange.id == id,
            exchange.request == .waitingForContinue
        else { return false }
        exchange.request = .writing
        self.state = .exchange(exchange)
        return true
    }

    /// Returns `.complete` or `.none`.
    mutating func requestEnded(id: UInt64) -> Action {
        guard case .exchange(var exchange) = self.state, exchange.id == id else { return .none }
        exchange.request = .done
        if case .complete(let reusable) = self.finishIfDone(exchange) { return .complete(reusable: reusable) }
        return .none
    }

    // MARK: Response parts from the device

    /// - Parameters:
    ///   - keepAlive: whether the head allows another exchange (version and `Connection`).
    ///   - selfDelimited: whether the body's end is marked by its framing (length, chunked, or
    ///     no body at all) rather than by the device closing the link.
    mutating func responseHead(
        status: Int,
        keepAlive: Bool,
        selfDelimited: Bool,
        framingProblem: String? = nil
    ) -> Action {
        if let framingProblem {
            self.state = .broken
            return .close(HTTPLinkError(.malformedResponse, framingProblem))
        }
        guard (100...599).contains(status) else {
            // RFC 9110 §15: values outside 100-599 are invalid. Taken as final, a status below
            // 200 would also skip the check for bytes after the body's end.
            self.state = .broken
            return .close(
                HTTPLinkError(
                    .malformedResponse,
                    "the device sent status code \(status), outside 100-599 (RFC 9110 §15)"
                )
            )
        }
        if status == 101 {
            self.state = .broken
            return .close(
                HTTPLinkError(.malformedResponse, "the device switched protocols (101) though no upgrade was asked for")
            )
        }
        guard case .exchange(var exchange) = self.state, exchange.response == .awaitingHead else {
            self.state = .broken
            return .close(
                HTTPLinkError(.strayBytes, "the device sent a response while none was due; the link was out of step")
            )
        }
        if (100..<200).contains(status) {
            exchange.informational += 1
            if exchange.informational > Self.maxInformationalResponses {
                self.state = .broken
                return .close(
                    HTTPLinkError(
                        .malformedResponse,
                        "the device sent more than \(Self.maxInformationalResponses) informational (1xx) responses "
                            + "before a final one"
                    )
                )
            }
            let releases = status == 100 && exchange.request == .waitingForContinue
            if releases { exchange.request = .writing }
            self.state = .exchange(exchange)
            return .awaitFinalHead(releaseRequestBody: releases)
        }
        var bodyAbandoned = false
        if exchange.request == .waitingForContinue {
            // The device answered without reading the body it asked us to hold back. Whether it
            // then expects that body anyway is ambiguous (RFC 9110 §10.1.1), so the link can
            // only be trusted again after a reopen.
            exchange.request = .done
            exchange.keepAlive = false
            bodyAbandoned = true
        } else if exchange.request == .writing && !(keepAlive && selfDelimited) {
            // The final answer came while the body was still going out, and the device closes
            // the link after it: it will not read the rest. RFC 9112 §9.3 (as curl does): stop
            // sending and take the answer; the link is not reused.
            exchange.request = .done
            exchange.keepAlive = false
            bodyAbandoned = true
        }
        exchange.keepAlive = exchange.keepAlive && keepAlive && selfDelimited
        exchange.bodiless = exchange.isHeadRequest || status == 204 || status == 304
        if exchange.consumerGone {
            if self.policy.closesAbandonedStreams {
                self.state = .broken
                return Self.closeAbandoned
            }
            exchange.response = .draining(discarded: 0)
            self.state = .exchange(exchange)
            return .forwardHead(deliver: false, requestBodyAbandoned: bodyAbandoned)
        }
        exchange.response = .body
        self.state = .exchange(exchange)
        return .forwardHead(deliver: true, requestBodyAbandoned: bodyAbandoned)
    }

    /// Returns `.forwardBody`, `.none` (drained) or `.close`.
    mutating func responseBody(byteCount: Int) -> Action {
        guard case .exchange(var exchange) = self.state else { return self.strayBody() }
        switch exchange.response {
        case .body:
            return .forwardBody
        case .draining(let discarded):
            let total = discarded + byteCount
            if total > self.policy.drainLimit {
                self.state = .broken
                return .close(
                    HTTPLinkError(.cancelled, "the response was abandoned and was too large to drain"),
                    note: "abandoned response exceeds the drain limit (\(self.policy.drainLimit) bytes); "
                        + "tearing the link down"
                )
            }
            exchange.response = .draining(discarded: total)
            self.state = .exchange(exchange)
            return .none
        case .awaitingHead, .done:
            return self.strayBody()
        }
    }

    /// The response ended. Returns `.endResponse` or `.close`.
    /// - Parameters:
    ///   - bytesFollowed: the device sent more bytes after its end, in the same read: the parser
    ///     holds them as the start of another response, so the link is not reused (the response
    ///     itself is whole and is delivered).
    ///   - connectionFieldsInTrailers: the trailer section carried `Connection` or
    ///     `Transfer-Encoding`, which RFC 9110 §6.5.1 keeps out of it; NIO's parser applies them to
    ///     its keep-alive decision anyway and may drop every later byte, so the link is not
    ///     reused either.
    mutating func responseEnded(bytesFollowed: Bool = false, connectionFieldsInTrailers: Bool = false) -> Action {
        let stray = HTTPLinkError(
            .strayBytes,
            "the device ended a response while none was due; the link was out of step"
        )
        guard case .exchange(var exchange) = self.state else {
            self.state = .broken
            return .close(stray)
        }
        let finishBody: Bool
        switch exchange.response {
        case .body: finishBody = true
        case .draining: finishBody = false
        case .awaitingHead, .done:
            self.state = .broken
            return .close(stray)
        }
        exchange.response = .done
        if bytesFollowed || connectionFieldsInTrailers { exchange.keepAlive = false }
        return .endResponse(finishBody: finishBody, completion: self.finishIfDone(exchange))
    }

    // MARK: The caller

    /// The consumer took a body part and says whether it wants more now (back-pressure), or
    /// asked for more later. Returns `.read` or `.none`.
    mutating func consumerDemand(id: UInt64, wantsMore: Bool) -> Action {
        guard case .exchange(var exchange) = self.state, exchange.id == id else { return .none }
        exchange.consumerWantsMore = wantsMore
        self.state = .exchange(exchange)
        return wantsMore ? .read : .none
    }

    /// The caller is done with the response (finished, threw, or was cancelled). Returns
    /// `.none`, `.drain` (the drain bound starts: the rest of the response, or its head and
    /// all of it, must be in by then) or `.close`.
    mutating func consumerGone(id: UInt64) -> Action {
        guard case .exchange(var exchange) = self.state, exchange.id == id else { return .none }
        switch exchange.response {
        case .awaitingHead:
            // Drain or close is decided when the head arrives (nothing is known of the response
            // yet), but the wait for it is part of the drain and is bounded like it: else only
            // the idle timeout bounded it, and the next request waited for the device to answer
            // a request nobody wanted any more (29 s behind a `/delay/30` through a bridge).
            if exchange.consumerGone { return .none }
            if self.policy.closesAbandonedStreams {
                self.state = .broken
                return Self.closeAbandoned
            }
            exchange.consumerGone = true
            self.state = .exchange(exchange)
            return .drain
        case .body:
            if self.policy.closesAbandonedStreams {
                self.state = .broken
                return Self.closeAbandoned
            }
            exchange.response = .draining(discarded: 0)
            self.state = .exchange(exchange)
            return .drain
        case .draining, .done:
            return .none
        }
    }

    /// The caller's task was cancelled. Returns `.none`, `.failCaller` or `.close` (on a transport
    /// whose abandoned streams are closed, or while the request is still going out).
    mutating func cancelled(id: UInt64) -> Action {
        guard let active = self.activeExchangeID, active == id else { return .none }
        let error = HTTPLinkError(.cancelled, "the request was cancelled")
        if self.policy.closesAbandonedStreams {
            // Not even the head is awaited: the next request goes out on a fresh stream.
            self.state = .broken
            return .close(error, note: "cancelled: closing this stream; the next request opens a fresh one")
        }
        if case .exchange(let exchange) = self.state, exchange.request != .done {
            // The request is still going out, and its body's producer went with the caller: it
            // can never be completed, and a write waiting for the device to take more would hold
            // the caller until the idle timeout.
            self.state = .broken
            return .close(error, note: "cancelled while the request was going out: closing this stream")
        }
        let drain = self.consumerGone(id: id) == .drain
        return .failCaller(error, thenDrain: drain)
    }

    /// The whole-exchange deadline passed. Returns `.none`, `.failCaller` or `.close`.
    mutating func exchangeTimedOut(id: UInt64) -> Action {
        guard case .exchange(var exchange) = self.state, exchange.id == id else { return .none }
        let error = HTTPLinkError(.exchangeTimeout, "the exchange took longer than its timeout")
        switch exchange.response {
        case .done where exchange.request == .done:
            return .none
        case .body where exchange.request == .done && !self.policy.closesAbandonedStreams:
            exchange.response = .draining(discarded: 0)
            self.state = .exchange(exchange)
            return .failCaller(error, thenDrain: true)
        case .body where exchange.request == .done:
            self.state = .broken
            return .close(error, note: "timed out: closing this stream; the next request opens a fresh one")
        default:
            // No head yet (its end cannot be known), a drain that is itself too slow, or a
            // request still being written.
            self.state = .broken
            return .close(error)
        }
    }

    /// The drain timeout of exchange `id` passed. Returns `.none` or `.close`.
    mutating func drainTimedOut(id: UInt64) -> Action {
        guard self.activeExchangeID == id else { return .none }
        self.state = .broken
        return .close(
            HTTPLinkError(.cancelled, "the abandoned response could not be drained in time"),
            note: "draining took too long; tearing the link down"
        )
    }

    // MARK: Failures

    /// A framing error, stray bytes, an idle timeout, EOF, a request body that failed: the link
    /// is no longer trustworthy. Returns whether the exchange in progress is over rather than
    /// failed: `byDevice` (the device ended the link: EOF, a write refused) after its whole
    /// answer, while only the request body was still going out (it answered without reading all
    /// of it). That answer is the device's final word on the request, whatever became of the
    /// rest of the body. A timeout or a close of this side's fails the exchange as ever.
    @discardableResult
    mutating func linkFailed(byDevice: Bool = false) -> Bool {
        defer { self.state = .broken }
        guard byDevice, case .exchange(let exchange) = self.state else { return false }
        return exchange.response == .done
    }

    // MARK: Private

    private static var closeAbandoned: Action {
        .close(
            HTTPLinkError(.cancelled, "the response was abandoned; its stream was closed, not drained"),
            note: "abandoned response: closing this stream; the next request opens a fresh one"
        )
    }

    private mutating func strayBody() -> Action {
        self.state = .broken
        return .close(
            HTTPLinkError(.strayBytes, "the device sent body bytes while none were due; the link was out of step")
        )
    }

    private mutating func finishIfDone(_ exchange: Exchange) -> Completion {
        guard exchange.request == .done, exchange.response == .done else {
            self.state = .exchange(exchange)
            return .pending
        }
        if exchange.keepAlive {
            self.state = .idle
            return .complete(reusable: true)
        }
        self.state = .broken
        return .complete(reusable: false)
    }
}
