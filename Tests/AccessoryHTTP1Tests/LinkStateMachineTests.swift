import Testing

@testable import AccessoryHTTP1

/// The I/O-free rules of one link: events in, actions out.
@Suite struct LinkStateMachineTests {
    typealias M = LinkStateMachine

    /// Actions compare errors by code.
    static func error(_ code: HTTPLinkError.Code) -> HTTPLinkError { HTTPLinkError(code, "") }

    static func completion(_ action: M.Action) -> M.Completion? {
        if case .endResponse(_, let completion) = action { return completion }
        return nil
    }

    func started(
        id: UInt64 = 1,
        head: Bool = false,
        continue: Bool = false,
        drainLimit: Int = 100,
        closes: Bool = false
    ) -> M {
        var machine = M(drainLimit: drainLimit, closesAbandonedStreams: closes)
        let started = machine.startExchange(id: id, isHeadRequest: head, expectsContinue: `continue`)
        #expect(started)
        return machine
    }

    @Test func normalExchangeIsReusable() {
        var m = started()
        #expect(m.requestEnded(id: 1) == .none)
        #expect(
            m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
                == .forwardHead(deliver: true, requestBodyAbandoned: false)
        )
        #expect(m.responseBody(byteCount: 10) == .forwardBody)
        #expect(m.responseEnded() == .endResponse(finishBody: true, completion: .complete(reusable: true)))
        #expect(m.state == .idle)
        // The next exchange may start.
        let started = m.startExchange(id: 2, isHeadRequest: false, expectsContinue: false)
        #expect(started)
    }

    @Test func secondExchangeWhileBusyIsRefused() {
        var m = started()
        let started = m.startExchange(id: 2, isHeadRequest: false, expectsContinue: false)
        #expect(!started)
    }

    @Test func connectionCloseIsNotReusable() {
        var m = started()
        _ = m.requestEnded(id: 1)
        #expect(
            m.responseHead(status: 200, keepAlive: false, selfDelimited: true)
                == .forwardHead(deliver: true, requestBodyAbandoned: false)
        )
        #expect(m.responseEnded() == .endResponse(finishBody: true, completion: .complete(reusable: false)))
        #expect(m.state == .broken)
    }

    @Test func closeDelimitedIsNotReusable() {
        var m = started()
        _ = m.requestEnded(id: 1)
        _ = m.responseHead(status: 200, keepAlive: true, selfDelimited: false)
        #expect(m.responseBody(byteCount: 5) == .forwardBody)
        #expect(Self.completion(m.responseEnded()) == .complete(reusable: false))
    }

    @Test func headRequest() {
        var m = started(head: true)
        _ = m.requestEnded(id: 1)
        #expect(
            m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
                == .forwardHead(deliver: true, requestBodyAbandoned: false)
        )
        #expect(m.responseEnded() == .endResponse(finishBody: true, completion: .complete(reusable: true)))
    }

    @Test func continueReleasesBody() {
        var m = started(continue: true)
        #expect(
            m.responseHead(status: 100, keepAlive: true, selfDelimited: true)
                == .awaitFinalHead(releaseRequestBody: true)
        )
        #expect(m.requestEnded(id: 1) == .none)
        #expect(
            m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
                == .forwardHead(deliver: true, requestBodyAbandoned: false)
        )
        #expect(Self.completion(m.responseEnded()) == .complete(reusable: true))
    }

    @Test func continueTimeoutReleasesBodyOnce() {
        var m = started(continue: true)
        let first = m.continueTimedOut(id: 1)
        let again = m.continueTimedOut(id: 1)
        let other = m.continueTimedOut(id: 9)
        #expect(first)
        #expect(!again)
        #expect(!other)
        // A late 100 is just an informational response now.
        #expect(
            m.responseHead(status: 100, keepAlive: true, selfDelimited: true)
                == .awaitFinalHead(releaseRequestBody: false)
        )
    }

    @Test func finalResponseBeforeContinueAbandonsBody() {
        var m = started(continue: true)
        #expect(
            m.responseHead(status: 417, keepAlive: true, selfDelimited: true)
                == .forwardHead(deliver: true, requestBodyAbandoned: true)
        )
        // The request counts as done: completion needs no requestEnded.
        #expect(m.responseEnded() == .endResponse(finishBody: true, completion: .complete(reusable: false)))
    }

    @Test func informationalResponsesAreIgnored() {
        var m = started()
        _ = m.requestEnded(id: 1)
        #expect(
            m.responseHead(status: 103, keepAlive: true, selfDelimited: true)
                == .awaitFinalHead(releaseRequestBody: false)
        )
        #expect(
            m.responseHead(status: 100, keepAlive: true, selfDelimited: true)
                == .awaitFinalHead(releaseRequestBody: false)
        )
        #expect(
            m.responseHead(status: 204, keepAlive: true, selfDelimited: true)
                == .forwardHead(deliver: true, requestBodyAbandoned: false)
        )
        #expect(Self.completion(m.responseEnded()) == .complete(reusable: true))
    }

    @Test func consumerGoneBeforeHeadDrains() {
        var m = started()
        _ = m.requestEnded(id: 1)
        #expect(m.consumerGone(id: 1) == .drain)  // the drain bound starts now, before the head
        #expect(m.consumerGone(id: 1) == .none)
        #expect(
            m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
                == .forwardHead(deliver: false, requestBodyAbandoned: false)
        )
        #expect(m.responseBody(byteCount: 50) == .none)
        #expect(m.responseEnded() == .endResponse(finishBody: false, completion: .complete(reusable: true)))
    }

    @Test func consumerGoneMidBodyDrainsAndStaysReusable() {
        var m = started()
        _ = m.requestEnded(id: 1)
        _ = m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        #expect(m.responseBody(byteCount: 10) == .forwardBody)
        #expect(m.consumerGone(id: 1) == .drain)
        #expect(m.consumerGone(id: 1) == .none)
        #expect(m.responseBody(byteCount: 60) == .none)
        #expect(m.responseBody(byteCount: 40) == .none)  // exactly the limit
        #expect(m.responseEnded() == .endResponse(finishBody: false, completion: .complete(reusable: true)))
    }

    @Test func consumerGoneForOtherExchangeIsIgnored() {
        var m = started()
        #expect(m.consumerGone(id: 7) == .none)
        _ = m.requestEnded(id: 1)
        #expect(
            m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
                == .forwardHead(deliver: true, requestBodyAbandoned: false)
        )
    }

    @Test func drainLimitExceeded() {
        var m = started(drainLimit: 100)
        _ = m.requestEnded(id: 1)
        _ = m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        _ = m.consumerGone(id: 1)
        #expect(m.responseBody(byteCount: 60) == .none)
        #expect(m.responseBody(byteCount: 41) == .close(Self.error(.cancelled)))
        #expect(m.state == .broken)
    }

    @Test func exchangeTimeoutWhileAwaitingHead() {
        var m = started()
        _ = m.requestEnded(id: 1)
        #expect(m.exchangeTimedOut(id: 2) == .none)
        #expect(m.exchangeTimedOut(id: 1) == .close(Self.error(.exchangeTimeout)))
        #expect(m.state == .broken)
    }

    @Test func exchangeTimeoutWhileWritingRequest() {
        var m = started()
        _ = m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        #expect(m.exchangeTimedOut(id: 1) == .close(Self.error(.exchangeTimeout)))
    }

    @Test func exchangeTimeoutInBodyDrains() {
        var m = started()
        _ = m.requestEnded(id: 1)
        _ = m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        #expect(m.exchangeTimedOut(id: 1) == .failCaller(Self.error(.exchangeTimeout), thenDrain: true))
        #expect(m.responseBody(byteCount: 10) == .none)
        #expect(Self.completion(m.responseEnded()) == .complete(reusable: true))
    }

    @Test func exchangeTimeoutWhileDrainingCloses() {
        var m = started()
        _ = m.requestEnded(id: 1)
        _ = m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        _ = m.consumerGone(id: 1)
        #expect(m.exchangeTimedOut(id: 1) == .close(Self.error(.exchangeTimeout)))
        #expect(m.state == .broken)
    }

    @Test func exchangeTimeoutAfterResponseWhileRequestStillWriting() {
        var m = started()
        _ = m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        #expect(Self.completion(m.responseEnded()) == .pending)
        #expect(m.exchangeTimedOut(id: 1) == .close(Self.error(.exchangeTimeout)))
    }

    @Test func exchangeTimeoutAfterCompletionIsIgnored() {
        var m = started()
        _ = m.requestEnded(id: 1)
        _ = m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        _ = m.responseEnded()
        #expect(m.exchangeTimedOut(id: 1) == .none)
        #expect(m.state == .idle)
    }

    @Test func partsWhileIdleAreProtocolViolations() {
        var a = M(drainLimit: 10)
        #expect(a.responseHead(status: 200, keepAlive: true, selfDelimited: true) == .close(Self.error(.strayBytes)))
        #expect(a.state == .broken)
        var b = M(drainLimit: 10)
        #expect(b.responseBody(byteCount: 1) == .close(Self.error(.strayBytes)))
        #expect(b.state == .broken)
        var c = M(drainLimit: 10)
        #expect(c.responseEnded() == .close(Self.error(.strayBytes)))
        #expect(c.state == .broken)
    }

    @Test func partsOutOfOrderAreProtocolViolations() {
        var a = started()
        #expect(a.responseBody(byteCount: 1) == .close(Self.error(.strayBytes)))
        var b = started()
        #expect(b.responseEnded() == .close(Self.error(.strayBytes)))
        var c = started()
        _ = c.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        #expect(c.responseHead(status: 200, keepAlive: true, selfDelimited: true) == .close(Self.error(.strayBytes)))
    }

    @Test func completionWaitsForRequestEnd() {
        var m = started()
        _ = m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        #expect(m.responseEnded() == .endResponse(finishBody: true, completion: .pending))
        #expect(m.activeExchangeID == 1)
        #expect(m.requestEnded(id: 2) == .none)
        #expect(m.requestEnded(id: 1) == .complete(reusable: true))
        #expect(m.state == .idle)
    }

    /// RFC 9112 §9.3: a final answer that closes the link, while the body is still going out,
    /// stops the body (the device will not read it) and ends the exchange with the answer.
    @Test(arguments: [(false, true), (true, false), (false, false)])
    func finalAnswerThatClosesWhileTheBodyGoesOutAbandonsTheBody(keepAlive: Bool, selfDelimited: Bool) {
        var m = started()
        #expect(
            m.responseHead(status: 413, keepAlive: keepAlive, selfDelimited: selfDelimited)
                == .forwardHead(deliver: true, requestBodyAbandoned: true)
        )
        #expect(m.responseBody(byteCount: 5) == .forwardBody)
        #expect(m.responseEnded() == .endResponse(finishBody: true, completion: .complete(reusable: false)))
        #expect(m.state == .broken)
        let ended = m.requestEnded(id: 1)
        #expect(ended == .none)
    }

    /// A keep-alive answer while the body goes out: the device reads the rest, so it is sent.
    @Test func finalAnswerThatKeepsTheLinkWhileTheBodyGoesOutKeepsSending() {
        var m = started()
        #expect(
            m.responseHead(status: 413, keepAlive: true, selfDelimited: true)
                == .forwardHead(deliver: true, requestBodyAbandoned: false)
        )
        #expect(m.responseEnded() == .endResponse(finishBody: true, completion: .pending))
    }

    /// The device ending the link after the whole answer, with the body still going out, leaves
    /// that exchange answered; before the answer's end, or ended by this side, it does not.
    @Test func linkFailedSaysWhetherTheAnswerWasWhole() {
        var answered = started()
        _ = answered.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        _ = answered.responseEnded()
        let wasAnswered = answered.linkFailed(byDevice: true)
        #expect(wasAnswered)
        var timedOut = started()
        _ = timedOut.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        _ = timedOut.responseEnded()
        let timedOutAnswered = timedOut.linkFailed(byDevice: false)
        #expect(!timedOutAnswered)
        var midBody = started()
        _ = midBody.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        let midBodyAnswered = midBody.linkFailed(byDevice: true)
        #expect(!midBodyAnswered)
        var idle = M(drainLimit: 1)
        let idleAnswered = idle.linkFailed(byDevice: true)
        #expect(!idleAnswered)
    }

    @Test func linkFailed() {
        var m = started()
        m.linkFailed()
        #expect(m.state == .broken)
        #expect(!m.wantsBytes)
        var idle = M(drainLimit: 1)
        idle.linkFailed()
        let started = idle.startExchange(id: 1, isHeadRequest: false, expectsContinue: false)
        #expect(!started)
    }

    // MARK: Decisions that were the handler's

    @Test func switchingProtocolsBreaksTheLink() {
        var m = started()
        _ = m.requestEnded(id: 1)
        #expect(
            m.responseHead(status: 101, keepAlive: true, selfDelimited: true) == .close(Self.error(.malformedResponse))
        )
        #expect(m.state == .broken)
    }

    @Test func readDemandFollowsTheConsumer() {
        var m = started()
        #expect(m.wantsBytes)  // awaiting the head
        _ = m.requestEnded(id: 1)
        _ = m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        #expect(m.wantsBytes)
        #expect(m.consumerDemand(id: 1, wantsMore: false) == .none)
        #expect(!m.wantsBytes)  // back-pressure: the consumer is full
        #expect(m.consumerDemand(id: 9, wantsMore: true) == .none)  // another exchange's consumer
        #expect(!m.wantsBytes)
        #expect(m.consumerDemand(id: 1, wantsMore: true) == .read)
        #expect(m.wantsBytes)
        _ = m.consumerDemand(id: 1, wantsMore: false)
        #expect(m.consumerGone(id: 1) == .drain)
        #expect(m.wantsBytes)  // draining reads whatever the consumer wanted
    }

    @Test func idleLinkWatchesForStrayBytes() {
        let m = M(drainLimit: 1)
        #expect(m.wantsBytes)
    }

    @Test func cancelBeforeHeadFailsTheCallerAndDrainsTheLateAnswer() {
        var m = started()
        _ = m.requestEnded(id: 1)
        #expect(m.cancelled(id: 2) == .none)
        // The drain bound starts at the cancel: the late answer's head is waited for within it.
        #expect(m.cancelled(id: 1) == .failCaller(Self.error(.cancelled), thenDrain: true))
        #expect(
            m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
                == .forwardHead(deliver: false, requestBodyAbandoned: false)
        )
        #expect(m.responseBody(byteCount: 5) == .none)
        #expect(m.responseEnded() == .endResponse(finishBody: false, completion: .complete(reusable: true)))
    }

    /// A request whose body is still going out cannot be completed once its caller is gone:
    /// the stream is closed (a body write waiting for the device had held the caller until the
    /// idle timeout).
    @Test func cancelWhileTheRequestIsGoingOutClosesTheStream() {
        var m = started()
        #expect(m.cancelled(id: 1) == .close(Self.error(.cancelled)))
        #expect(m.state == .broken)
    }

    @Test func cancelMidBodyDrains() {
        var m = started()
        _ = m.requestEnded(id: 1)
        _ = m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        #expect(m.cancelled(id: 1) == .failCaller(Self.error(.cancelled), thenDrain: true))
        #expect(m.responseBody(byteCount: 5) == .none)
    }

    @Test func drainTimeoutClosesOnlyTheExchangeItWasFor() {
        var m = started()
        _ = m.requestEnded(id: 1)
        _ = m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        _ = m.consumerGone(id: 1)
        #expect(m.drainTimedOut(id: 7) == .none)
        #expect(m.drainTimedOut(id: 1) == .close(Self.error(.cancelled)))
        #expect(m.state == .broken)
    }

    /// A transport that opens independent streams: an abandoned response is never drained.
    @Test func independentStreamsCloseInsteadOfDraining() {
        var cancelled = started(closes: true)
        _ = cancelled.requestEnded(id: 1)
        #expect(cancelled.cancelled(id: 1) == .close(Self.error(.cancelled)))
        #expect(cancelled.state == .broken)

        var leftMidBody = started(closes: true)
        _ = leftMidBody.requestEnded(id: 1)
        _ = leftMidBody.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        #expect(leftMidBody.consumerGone(id: 1) == .close(Self.error(.cancelled)))

        var leftBeforeHead = started(closes: true)
        _ = leftBeforeHead.requestEnded(id: 1)
        // Not even the head is waited for: the next request goes out on a fresh stream.
        #expect(leftBeforeHead.consumerGone(id: 1) == .close(Self.error(.cancelled)))
        #expect(leftBeforeHead.state == .broken)

        var timedOut = started(closes: true)
        _ = timedOut.requestEnded(id: 1)
        _ = timedOut.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        #expect(timedOut.exchangeTimedOut(id: 1) == .close(Self.error(.exchangeTimeout)))

        // A response read to its end keeps the link, as on any transport.
        var whole = started(closes: true)
        _ = whole.requestEnded(id: 1)
        _ = whole.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        #expect(whole.responseEnded() == .endResponse(finishBody: true, completion: .complete(reusable: true)))
    }
}
