/// The rules of one HTTP/1.1 link, free of I/O: events go in, actions come out.
///
/// One exchange at a time. An exchange ends when both the request has been written and the
/// response has been read to its end (delivered, or drained after the caller abandoned it). The
/// link may carry the next exchange only if every byte of this one was accounted for and both
/// sides want to keep it alive; otherwise it is torn down and reopened, so that stale bytes are
/// never read as the next response.
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
    }

    enum State: Equatable {
        case idle
        case exchange(Exchange)
        /// The link must not be used again; the handler closes it.
        case broken
    }

    private(set) var state: State = .idle
    let drainLimit: Int

    init(drainLimit: Int) {
        self.drainLimit = drainLimit
    }

    var activeExchangeID: UInt64? {
        if case .exchange(let exchange) = self.state { return exchange.id }
        return nil
    }

    // MARK: Starting

    enum StartAction: Equatable {
        case start
        case refuse
    }

    mutating func startExchange(id: UInt64, isHeadRequest: Bool, expectsContinue: Bool) -> StartAction {
        guard case .idle = self.state else { return .refuse }
        self.state = .exchange(
            Exchange(id: id, isHeadRequest: isHeadRequest, request: expectsContinue ? .waitingForContinue : .writing)
        )
        return .start
    }

    // MARK: Request side

    enum CompletionAction: Equatable {
        case none
        /// The exchange is over; `reusable` says whether the link may carry the next one.
        case complete(reusable: Bool)
    }

    /// The continue timeout passed without a `100 Continue`: send the body anyway, as curl does.
    mutating func continueTimedOut(id: UInt64) -> Bool {
        guard case .exchange(var exchange) = self.state, exchange.id == id,
            exchange.request == .waitingForContinue
        else { return false }
        exchange.request = .writing
        self.state = .exchange(exchange)
        return true
    }

    mutating func requestEnded(id: UInt64) -> CompletionAction {
        guard case .exchange(var exchange) = self.state, exchange.id == id else { return .none }
        exchange.request = .done
        return self.finishIfDone(exchange)
    }

    // MARK: Response side

    enum HeadAction: Equatable {
        /// An informational response that lets a waiting request body go.
        case releaseRequestBody
        /// An informational response to ignore.
        case ignore
        /// Hand the final head to the caller. `requestBodyAbandoned`: the device answered before
        /// the body it asked to wait for, so the body must not be sent.
        case deliver(requestBodyAbandoned: Bool)
        /// The caller is already gone: read the body and discard it.
        case drain(requestBodyAbandoned: Bool)
        /// A head arrived when none was due.
        case protocolViolation
    }

    /// - Parameters:
    ///   - keepAlive: whether the head allows another exchange (version and `Connection`).
    ///   - selfDelimited: whether the body's end is marked by its framing (length, chunked, or
    ///     no body at all) rather than by the device closing the link.
    mutating func responseHead(status: Int, keepAlive: Bool, selfDelimited: Bool) -> HeadAction {
        guard case .exchange(var exchange) = self.state, exchange.response == .awaitingHead else {
            self.state = .broken
            return .protocolViolation
        }
        if (100..<200).contains(status) {
            if status == 100, exchange.request == .waitingForContinue {
                exchange.request = .writing
                self.state = .exchange(exchange)
                return .releaseRequestBody
            }
            return .ignore
        }
        var bodyAbandoned = false
        if exchange.request == .waitingForContinue {
            // The device answered without reading the body it asked us to hold back. Whether it
            // then expects that body anyway is ambiguous (RFC 9110 §10.1.1), so the link can
            // only be trusted again after a reopen.
            exchange.request = .done
            exchange.keepAlive = false
            bodyAbandoned = true
        }
        exchange.keepAlive = exchange.keepAlive && keepAlive && selfDelimited
        if exchange.consumerGone {
            exchange.response = .draining(discarded: 0)
            self.state = .exchange(exchange)
            return .drain(requestBodyAbandoned: bodyAbandoned)
        }
        exchange.response = .body
        self.state = .exchange(exchange)
        return .deliver(requestBodyAbandoned: bodyAbandoned)
    }

    enum BodyAction: Equatable {
        case deliver
        case discard
        /// Draining would pass the bound: tear the link down instead.
        case drainLimitExceeded
        case protocolViolation
    }

    mutating func responseBody(byteCount: Int) -> BodyAction {
        guard case .exchange(var exchange) = self.state else {
            self.state = .broken
            return .protocolViolation
        }
        switch exchange.response {
        case .body:
            return .deliver
        case .draining(let discarded):
            let total = discarded + byteCount
            if total > self.drainLimit {
                self.state = .broken
                return .drainLimitExceeded
            }
            exchange.response = .draining(discarded: total)
            self.state = .exchange(exchange)
            return .discard
        case .awaitingHead, .done:
            self.state = .broken
            return .protocolViolation
        }
    }

    struct EndAction: Equatable {
        /// Tell the consumer the body is complete.
        var finishBody: Bool
        var completion: CompletionAction
        static let protocolViolation = EndAction(finishBody: false, completion: .none)
    }

    mutating func responseEnded() -> EndAction {
        guard case .exchange(var exchange) = self.state else {
            self.state = .broken
            return .protocolViolation
        }
        let finishBody: Bool
        switch exchange.response {
        case .body: finishBody = true
        case .draining: finishBody = false
        case .awaitingHead, .done:
            self.state = .broken
            return .protocolViolation
        }
        exchange.response = .done
        return EndAction(finishBody: finishBody, completion: self.finishIfDone(exchange))
    }

    // MARK: The caller

    enum ConsumerGoneAction: Equatable {
        case none
        /// Start reading to drain the rest of the body.
        case startDraining
    }

    mutating func consumerGone(id: UInt64) -> ConsumerGoneAction {
        guard case .exchange(var exchange) = self.state, exchange.id == id else { return .none }
        switch exchange.response {
        case .awaitingHead:
            exchange.consumerGone = true
            self.state = .exchange(exchange)
            return .none
        case .body:
            exchange.response = .draining(discarded: 0)
            self.state = .exchange(exchange)
            return .startDraining
        case .draining, .done:
            return .none
        }
    }

    enum TimeoutAction: Equatable {
        case none
        /// Fail the caller but keep reading: the rest of the body is drained (bounded).
        case failConsumerAndDrain
        /// Fail the caller and tear the link down.
        case failAndClose
    }

    /// The whole-exchange deadline passed.
    mutating func exchangeTimedOut(id: UInt64) -> TimeoutAction {
        guard case .exchange(var exchange) = self.state, exchange.id == id else { return .none }
        switch exchange.response {
        case .body where exchange.request == .done:
            exchange.response = .draining(discarded: 0)
            self.state = .exchange(exchange)
            return .failConsumerAndDrain
        case .done where exchange.request == .done:
            return .none
        default:
            // No head yet (its end cannot be known), a drain that is itself too slow, or a
            // request still being written: the link cannot be brought back in step cheaply.
            self.state = .broken
            return .failAndClose
        }
    }

    // MARK: Failures

    /// A framing error, stray bytes, an idle timeout, EOF, a request body that failed: the link
    /// is no longer trustworthy. Returns whether an exchange was in progress (to be failed).
    mutating func linkFailed() -> Bool {
        let hadExchange: Bool
        if case .exchange(let exchange) = self.state {
            hadExchange = exchange.response != .done || exchange.request != .done
        } else {
            hadExchange = false
        }
        self.state = .broken
        return hadExchange
    }

    // MARK: Private

    private mutating func finishIfDone(_ exchange: Exchange) -> CompletionAction {
        guard exchange.request == .done, exchange.response == .done else {
            self.state = .exchange(exchange)
            return .none
        }
        if exchange.keepAlive {
            self.state = .idle
            return .complete(reusable: true)
        }
        self.state = .broken
        return .complete(reusable: false)
    }
}
