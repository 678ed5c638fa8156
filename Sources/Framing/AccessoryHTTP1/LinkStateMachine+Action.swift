extension LinkStateMachine {
    /// What the handler does after an event. Each case names all of it, the link guard's mode
    /// included.
    enum Action: Equatable {
        case none
        /// Ask the device for bytes (when ``wantsBytes`` and no read is pending).
        case read
        /// An informational head passed; the guard expects a status line again.
        /// `releaseRequestBody`: it was `100 Continue`, so the held request body may go.
        case awaitFinalHead(releaseRequestBody: Bool)
        /// The final head arrived; the guard passes the body through. `deliver`: hand the head to
        /// the caller (else nobody waits for it and its body is drained).
        /// `requestBodyAbandoned`: the device answered before the body it asked to wait for, or
        /// answered while the body was going out and closes the link after this answer, so the
        /// rest of the body must not be sent.
        case forwardHead(deliver: Bool, requestBodyAbandoned: Bool)
        /// Hand this body part to the consumer.
        case forwardBody
        /// The response is over: end the consumer's body (if `finishBody`: it was not drained),
        /// then act on `completion`.
        case endResponse(finishBody: Bool, completion: Completion)
        /// The exchange is over.
        case complete(reusable: Bool)
        /// Fail what the caller waits for (head, body) with `error`. The link stays up; with
        /// `thenDrain`, the rest of the response is read and discarded from now on, within the
        /// drain timeout.
        case failCaller(HTTPLinkError, thenDrain: Bool)
        /// The consumer left mid-body: drain the rest, within the drain timeout.
        case drain
        /// Fail everything in progress with `error` and close the link (the guard discards).
        /// `note` goes to the trace first.
        case close(HTTPLinkError, note: String? = nil)

        static func == (lhs: Action, rhs: Action) -> Bool {
            switch (lhs, rhs) {
            case (.none, .none), (.read, .read), (.forwardBody, .forwardBody), (.drain, .drain): return true
            case (.awaitFinalHead(let a), .awaitFinalHead(let b)): return a == b
            case (.forwardHead(let a, let b), .forwardHead(let c, let d)): return a == c && b == d
            case (.endResponse(let a, let b), .endResponse(let c, let d)): return a == c && b == d
            case (.complete(let a), .complete(let b)): return a == b
            case (.failCaller(let a, let b), .failCaller(let c, let d)): return a.code == c.code && b == d
            case (.close(let a, _), .close(let b, _)): return a.code == b.code
            default: return false
            }
        }
    }

    enum Completion: Equatable {
        /// The exchange goes on (the other side of it is not done yet).
        case pending
        case complete(reusable: Bool)
    }
}
