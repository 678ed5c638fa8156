import NIOCore

/// Where the body of the exchange in progress goes: an async sequence with back-pressure, or
/// a buffer gathered until a consumer on the event loop claims it (``PendingResponseBody``).
/// Its one job is the body's lifecycle: parts in, one ending out (normal or failed), never
/// dropped unfinished (NIO traps on a producer source that is).
struct ResponseBodySink {
    private var source: ResponseBodyProducer.Source?
    private(set) var pending: PendingResponseBody?
    /// How much a pending body gathers before it stops asking for more.
    private let pendingLimit: Int

    private init(source: ResponseBodyProducer.Source?, pending: PendingResponseBody?, pendingLimit: Int) {
        self.source = source
        self.pending = pending
        self.pendingLimit = pendingLimit
    }

    static func stream(_ source: ResponseBodyProducer.Source) -> Self {
        Self(source: source, pending: nil, pendingLimit: 0)
    }

    /// - Parameter limit: gather no more than a slow stream consumer would buffer.
    static func pending(_ pending: PendingResponseBody, limit: Int) -> Self {
        Self(source: nil, pending: pending, pendingLimit: limit)
    }

    /// Makes the async sequence a streamed body goes through.
    static func makeProducer(
        bufferSize: Int,
        delegate: ResponseBodyDelegate
    ) -> ResponseBodyProducer.NewSequence {
        // Counted in reads, each at most `maximumReadSize`, so the bytes waiting for a slow
        // consumer stay within `bufferSize` (plus the one read in flight).
        let highWatermark = max(2, bufferSize / HTTPLinkHandler.maximumReadSize)
        return ResponseBodyProducer.makeSequence(
            elementType: ByteBuffer.self,
            backPressureStrategy: .init(lowWatermark: max(1, highWatermark / 4), highWatermark: highWatermark),
            finishOnDeinit: false,
            delegate: delegate
        )
    }

    /// Hands a part on; returns whether the consumer wants more now.
    func deliver(_ part: ByteBuffer) -> Bool {
        if let source = self.source { return source.yield(part) != .stopProducing }
        guard let pending = self.pending else { return true }
        pending.append(part)
        return pending.byteCount < self.pendingLimit
    }

    /// Ends the body, normally (`nil`) or with `error`. Later calls do nothing.
    mutating func finish(_ error: HTTPLinkError?) {
        if let error {
            self.source?.finish(error)
            self.pending?.fail(error)
        } else {
            self.source?.finish()
            self.pending?.ended = true
        }
        self.source = nil
        self.pending = nil
    }

    /// The consumer claimed the pending body `pending` and reads on through `source`. Returns
    /// `false` if this sink no longer holds that body (the exchange ended or failed).
    mutating func claim(_ pending: PendingResponseBody, continuingIn source: ResponseBodyProducer.Source) -> Bool {
        guard self.pending === pending else { return false }
        self.pending = nil
        self.source = source
        return true
    }
}
