import Testing

@testable import AccessoryHTTP1

/// The I/O-free rules of one link: events in, actions out.
@Suite struct LinkStateMachineTests {
    typealias M = LinkStateMachine

    func started(id: UInt64 = 1, head: Bool = false, continue: Bool = false, drainLimit: Int = 100) -> M {
        var machine = M(drainLimit: drainLimit)
        #expect(machine.startExchange(id: id, isHeadRequest: head, expectsContinue: `continue`) == .start)
        return machine
    }

    @Test func normalExchangeIsReusable() {
        var m = started()
        #expect(m.requestEnded(id: 1) == .none)
        #expect(
            m.responseHead(status: 200, keepAlive: true, selfDelimited: true) == .deliver(requestBodyAbandoned: false)
        )
        #expect(m.responseBody(byteCount: 10) == .deliver)
        #expect(m.responseEnded() == .init(finishBody: true, completion: .complete(reusable: true)))
        #expect(m.state == .idle)
        // The next exchange may start.
        #expect(m.startExchange(id: 2, isHeadRequest: false, expectsContinue: false) == .start)
    }

    @Test func secondExchangeWhileBusyIsRefused() {
        var m = started()
        #expect(m.startExchange(id: 2, isHeadRequest: false, expectsContinue: false) == .refuse)
    }

    @Test func connectionCloseIsNotReusable() {
        var m = started()
        _ = m.requestEnded(id: 1)
        #expect(
            m.responseHead(status: 200, keepAlive: false, selfDelimited: true) == .deliver(requestBodyAbandoned: false)
        )
        #expect(m.responseEnded() == .init(finishBody: true, completion: .complete(reusable: false)))
        #expect(m.state == .broken)
    }

    @Test func closeDelimitedIsNotReusable() {
        var m = started()
        _ = m.requestEnded(id: 1)
        _ = m.responseHead(status: 200, keepAlive: true, selfDelimited: false)
        #expect(m.responseBody(byteCount: 5) == .deliver)
        #expect(m.responseEnded().completion == .complete(reusable: false))
    }

    @Test func headRequest() {
        var m = started(head: true)
        _ = m.requestEnded(id: 1)
        #expect(
            m.responseHead(status: 200, keepAlive: true, selfDelimited: true) == .deliver(requestBodyAbandoned: false)
        )
        #expect(m.responseEnded() == .init(finishBody: true, completion: .complete(reusable: true)))
    }

    @Test func continueReleasesBody() {
        var m = started(continue: true)
        #expect(m.responseHead(status: 100, keepAlive: true, selfDelimited: true) == .releaseRequestBody)
        #expect(m.requestEnded(id: 1) == .none)
        #expect(
            m.responseHead(status: 200, keepAlive: true, selfDelimited: true) == .deliver(requestBodyAbandoned: false)
        )
        #expect(m.responseEnded().completion == .complete(reusable: true))
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
        #expect(m.responseHead(status: 100, keepAlive: true, selfDelimited: true) == .ignore)
    }

    @Test func finalResponseBeforeContinueAbandonsBody() {
        var m = started(continue: true)
        #expect(
            m.responseHead(status: 417, keepAlive: true, selfDelimited: true) == .deliver(requestBodyAbandoned: true)
        )
        // The request counts as done: completion needs no requestEnded.
        #expect(m.responseEnded() == .init(finishBody: true, completion: .complete(reusable: false)))
    }

    @Test func informationalResponsesAreIgnored() {
        var m = started()
        _ = m.requestEnded(id: 1)
        #expect(m.responseHead(status: 103, keepAlive: true, selfDelimited: true) == .ignore)
        #expect(m.responseHead(status: 100, keepAlive: true, selfDelimited: true) == .ignore)
        #expect(
            m.responseHead(status: 204, keepAlive: true, selfDelimited: true) == .deliver(requestBodyAbandoned: false)
        )
        #expect(m.responseEnded().completion == .complete(reusable: true))
    }

    @Test func consumerGoneBeforeHeadDrains() {
        var m = started()
        _ = m.requestEnded(id: 1)
        #expect(m.consumerGone(id: 1) == .none)
        #expect(
            m.responseHead(status: 200, keepAlive: true, selfDelimited: true) == .drain(requestBodyAbandoned: false)
        )
        #expect(m.responseBody(byteCount: 50) == .discard)
        #expect(m.responseEnded() == .init(finishBody: false, completion: .complete(reusable: true)))
    }

    @Test func consumerGoneMidBodyDrainsAndStaysReusable() {
        var m = started()
        _ = m.requestEnded(id: 1)
        _ = m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        #expect(m.responseBody(byteCount: 10) == .deliver)
        #expect(m.consumerGone(id: 1) == .startDraining)
        #expect(m.consumerGone(id: 1) == .none)
        #expect(m.responseBody(byteCount: 60) == .discard)
        #expect(m.responseBody(byteCount: 40) == .discard)  // exactly the limit
        #expect(m.responseEnded() == .init(finishBody: false, completion: .complete(reusable: true)))
    }

    @Test func consumerGoneForOtherExchangeIsIgnored() {
        var m = started()
        #expect(m.consumerGone(id: 7) == .none)
        _ = m.requestEnded(id: 1)
        #expect(
            m.responseHead(status: 200, keepAlive: true, selfDelimited: true) == .deliver(requestBodyAbandoned: false)
        )
    }

    @Test func drainLimitExceeded() {
        var m = started(drainLimit: 100)
        _ = m.requestEnded(id: 1)
        _ = m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        _ = m.consumerGone(id: 1)
        #expect(m.responseBody(byteCount: 60) == .discard)
        #expect(m.responseBody(byteCount: 41) == .drainLimitExceeded)
        #expect(m.state == .broken)
    }

    @Test func exchangeTimeoutWhileAwaitingHead() {
        var m = started()
        _ = m.requestEnded(id: 1)
        #expect(m.exchangeTimedOut(id: 2) == .none)
        #expect(m.exchangeTimedOut(id: 1) == .failAndClose)
        #expect(m.state == .broken)
    }

    @Test func exchangeTimeoutWhileWritingRequest() {
        var m = started()
        _ = m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        #expect(m.exchangeTimedOut(id: 1) == .failAndClose)
    }

    @Test func exchangeTimeoutInBodyDrains() {
        var m = started()
        _ = m.requestEnded(id: 1)
        _ = m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        #expect(m.exchangeTimedOut(id: 1) == .failConsumerAndDrain)
        #expect(m.responseBody(byteCount: 10) == .discard)
        #expect(m.responseEnded().completion == .complete(reusable: true))
    }

    @Test func exchangeTimeoutWhileDrainingCloses() {
        var m = started()
        _ = m.requestEnded(id: 1)
        _ = m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        _ = m.consumerGone(id: 1)
        #expect(m.exchangeTimedOut(id: 1) == .failAndClose)
        #expect(m.state == .broken)
    }

    @Test func exchangeTimeoutAfterResponseWhileRequestStillWriting() {
        var m = started()
        _ = m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        #expect(m.responseEnded().completion == .none)
        #expect(m.exchangeTimedOut(id: 1) == .failAndClose)
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
        #expect(a.responseHead(status: 200, keepAlive: true, selfDelimited: true) == .protocolViolation)
        #expect(a.state == .broken)
        var b = M(drainLimit: 10)
        #expect(b.responseBody(byteCount: 1) == .protocolViolation)
        #expect(b.state == .broken)
        var c = M(drainLimit: 10)
        #expect(c.responseEnded() == .protocolViolation)
        #expect(c.state == .broken)
    }

    @Test func partsOutOfOrderAreProtocolViolations() {
        var a = started()
        #expect(a.responseBody(byteCount: 1) == .protocolViolation)
        var b = started()
        #expect(b.responseEnded() == .protocolViolation)
        var c = started()
        _ = c.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        #expect(c.responseHead(status: 200, keepAlive: true, selfDelimited: true) == .protocolViolation)
    }

    @Test func completionWaitsForRequestEnd() {
        var m = started()
        _ = m.responseHead(status: 200, keepAlive: true, selfDelimited: true)
        #expect(m.responseEnded() == .init(finishBody: true, completion: .none))
        #expect(m.activeExchangeID == 1)
        #expect(m.requestEnded(id: 2) == .none)
        #expect(m.requestEnded(id: 1) == .complete(reusable: true))
        #expect(m.state == .idle)
    }

    @Test func linkFailed() {
        var m = started()
        let hadExchange = m.linkFailed()
        #expect(hadExchange)
        #expect(m.state == .broken)
        var idle = M(drainLimit: 1)
        let idleHadExchange = idle.linkFailed()
        #expect(!idleHadExchange)
        #expect(idle.startExchange(id: 1, isHeadRequest: false, expectsContinue: false) == .refuse)
    }
}
