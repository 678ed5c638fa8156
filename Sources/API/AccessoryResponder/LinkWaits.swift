import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// The request parts a link's task has not taken yet, the task waiting for the next one, the
/// tasks waiting until the link takes more, and how the request side ended: what both kinds of
/// link end keep (``ResponderLinkHandler``, ``HTTP2ServerStream``). Event loop only.
///
/// A class, not a struct held by the link end: resuming a promise waiter runs its callbacks at
/// once, and they may come back to the link end while a struct's mutation would still be under
/// way.
final class LinkWaits {
    private var queue = CircularBuffer<HTTPRequestPart>(initialCapacity: 4)
    /// Set once the peer closed its side (`.success`) or the request side failed.
    private(set) var inboundEnd: Result<Void, any Error>?
    private var partWaiter: LinkWaiter<HTTPRequestPart?>?
    private var writabilityWaiters: [LinkWaiter<Void>] = []

    /// Parts queued for the task.
    var queuedCount: Int { self.queue.count }

    /// A part arrived: the waiting task gets it (`true`), or it is queued (`false`).
    func arrived(_ part: HTTPRequestPart) -> Bool {
        guard let waiter = self.partWaiter else {
            self.queue.append(part)
            return false
        }
        self.partWaiter = nil
        waiter.resume(with: .success(part))
        return true
    }

    /// The oldest queued part, if any.
    func takeQueued() -> HTTPRequestPart? {
        self.queue.popFirst()
    }

    /// What the task gets when no part is queued.
    var nothingQueued: LinkTaken {
        switch self.inboundEnd {
        case .none: .empty
        case .success: .end
        case .failure(let error): .failed(error)
        }
    }

    /// The task waits for the next part; `false` (and `waiter` failed) when another waits already.
    func wait(_ waiter: LinkWaiter<HTTPRequestPart?>) -> Bool {
        guard self.partWaiter == nil else {
            waiter.resume(with: .failure(ResponderError(.bodyUnavailable, "the link is already being read")))
            return false
        }
        self.partWaiter = waiter
        return true
    }

    /// The request side ended (the first end counts); a waiting task learns it now, one that
    /// reads later after the parts still queued.
    func endInbound(_ result: Result<Void, any Error>) {
        guard self.inboundEnd == nil else { return }
        self.inboundEnd = result
        // A waiter means the queue is empty.
        guard let waiter = self.partWaiter else { return }
        self.partWaiter = nil
        waiter.resume(with: result.map { nil })
    }

    /// `waiter` waits until the link takes more.
    func waitForWritability(_ waiter: LinkWaiter<Void>) {
        self.writabilityWaiters.append(waiter)
    }

    /// Resumes every writability waiter with `result`; the list is emptied first, since a
    /// resumed waiter on the event loop may wait again.
    func resumeWritabilityWaiters(_ result: Result<Void, any Error>) {
        let waiters = self.writabilityWaiters
        self.writabilityWaiters.removeAll()
        for waiter in waiters { waiter.resume(with: result) }
    }

    /// The reading task was cancelled: its wait for a part fails with `CancellationError`.
    func cancelPartWaiter() {
        if let waiter = self.partWaiter {
            self.partWaiter = nil
            waiter.resume(with: .failure(CancellationError()))
        }
    }
}

@available(*, unavailable)
extension LinkWaits: Sendable {}
