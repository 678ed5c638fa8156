import HTTPTypes

/// When an HTTP/1.1 link ends after a graceful shutdown began (`ChannelShouldQuiesceEvent`,
/// from ``ResponderShutdown``): at once if no exchange is under way, else once the answer under
/// way was written, with `Connection: close` on its head if that was not written yet (RFC 9112
/// §9.6). What NIO's HTTPServerPipelineHandler does on the same event, without its pipelining
/// (the link serves strictly in order). I/O-free: ``HTTP1ServerPartConverter``, which sees
/// both directions anyway, feeds it and carries out what it returns.
struct HTTP1LinkEnd {
    /// What to do when the shutdown's event arrives.
    enum OnQuiesce: Equatable {
        /// Nothing under way: close now.
        case closeNow
        /// An answer is under way: close once its end was written (or the bound passed).
        case closeAfterAnswer
        /// Already quiescing: nothing new.
        case nothing
    }

    /// From a request head until its answer's end was written.
    private var exchangeUnderWay = false
    private(set) var quiescing = false

    /// A request head arrived. One that came after the shutdown began is still answered: the
    /// host sent it before it could know.
    mutating func requestHeadArrived() {
        self.exchangeUnderWay = true
    }

    mutating func quiesce() -> OnQuiesce {
        guard !self.quiescing else { return .nothing }
        self.quiescing = true
        return self.exchangeUnderWay ? .closeAfterAnswer : .closeNow
    }

    /// A response head is written: once quiescing, a final one says the link closes. (An
    /// informational head, `100 Continue`, is followed by the final one and keeps it open.)
    func responseHead(_ response: inout HTTPResponse) {
        guard self.quiescing, response.status.kind != .informational else { return }
        response.headerFields[.connection] = "close"
    }

    /// A response's end is written; returns whether the link closes once it has left.
    mutating func responseEnded() -> Bool {
        self.exchangeUnderWay = false
        return self.quiescing
    }
}
