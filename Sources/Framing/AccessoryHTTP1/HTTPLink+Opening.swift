import AccessoryTransport
import NIOCore

/// Opening, renewing and closing the link's connection.
extension HTTPLink {
    /// The connection currently open, if any; throws once the link is shut down.
    func existingConnection() throws -> Connection? {
        try self.state.withLock { state in
            if state.isShutDown { throw HTTPLinkError(.shutDown, "the link was shut down") }
            return state.connection
        }
    }

    /// Opens a new connection (the current one, if any, has been found unusable and forgotten),
    /// or joins the open already under way, waiting for it until `deadline`.
    ///
    /// The open runs on its own, not in the caller's task: when the caller's deadline passes (or
    /// it is cancelled) first, the call ends then (`exchange-timeout`, `cancelled`; the exchange
    /// had not begun) and the open goes on, bounded by the open timeout, for the next request —
    /// as a connection pool keeps a connection whose request gave up. Before, either the call
    /// waited for the whole open past its deadline, or (tried once) the late open was thrown
    /// away and a one-connection device saw its link closed.
    func openConnection(deadline: NIODeadline?) async throws -> Connection {
        let opening: Task<Connection, any Error> = try self.state.withLock { state in
            if state.isShutDown { throw HTTPLinkError(.shutDown, "the link was shut down") }
            if let pending = state.pendingOpen { return pending.task }
            state.openAttempts += 1
            let id = state.openAttempts
            let task = Task {
                defer {
                    self.state.withLock { state in
                        if state.pendingOpen?.id == id { state.pendingOpen = nil }
                    }
                }
                return try await self.openNow()
            }
            state.pendingOpen = (id, task)
            return task
        }
        return try await waitForOpen(
            opening,
            until: deadline,
            expired:
                "the request's deadline passed while opening \(self.transport) (the exchange had not begun; the open goes on for the next request)",
            cancelled: "the request was cancelled while the link was opening"
        )
    }

    /// Waits for an open under way, if any (its outcome is the joiner's business).
    func waitForPendingOpen() async {
        if let pending = self.state.withLock({ $0.pendingOpen }) { _ = await pending.task.result }
    }

    /// Opens a new connection: a new stream on the stream the link gave up, if it stayed open
    /// for that, else the transport opened again.
    private func openNow() async throws -> Connection {
        _ = try self.existingConnection()
        if let parked = self.state.withLock({ state in
            defer { state.parked = nil }; return state.parked
        }) {
            if let renewed = try await self.renew(parked) { return renewed }
        }
        let isReopen = self.state.withLock { $0.opens > 0 }
        let mustSettle = isReopen && self.transport.reopenMayCarryStaleBytes
        // The stream closed before may still hold the device (a USB interface released by the
        // bridge's thread after its last transfer is back): opened now, this process's own
        // claim would make it look busy. Waited for within the open timeout.
        let releases = ReleaseWait(
            self.transport.reopenWaitsForRelease ? self.state.withLock({ Array($0.releasing.values) }) : []
        )
        let opened = try await LinkOpener(
            transport: self.transport,
            configuration: self.configuration,
            eventLoop: self.eventLoop,
            stragglers: self.stragglers
        ).open(discardingInput: mustSettle, after: releases)
        let connection = Connection(stream: opened.stream, pipeline: opened.pipeline)
        if mustSettle {
            let handler = connection.handler
            try await self.eventLoop.flatSubmit { handler.value.settle() }.get()
        }
        try self.adopt(connection, counting: \.opens, whileIt: "was opening")
        self.configuration.tracer?.emit(.note(isReopen ? "reopened \(self.transport)" : "opened \(self.transport)"))
        return connection
    }

    /// Starts a new stream on `parked`. Returns `nil` if its channel closed meanwhile (the
    /// transport is then opened again); throws if the device did not take the new stream (the
    /// channel is closed, and the next request opens the transport again).
    private func renew(_ parked: Connection) async throws -> Connection? {
        guard parked.stream.channel.isActive else {
            self.close(parked)
            return nil
        }
        let pipeline: LinkPipeline
        do {
            pipeline = try await LinkOpener(
                transport: self.transport,
                configuration: self.configuration,
                eventLoop: self.eventLoop,
                stragglers: self.stragglers
            ).renew(parked.stream, replacing: parked.pipeline)
        } catch {
            let wasOpen = parked.stream.channel.isActive
            self.close(parked)
            if !wasOpen, (error as? HTTPLinkError)?.code != .cancelled { return nil }
            throw try await self.enrich(error, parked, until: nil)  // the open is not the caller's wait
        }
        let connection = Connection(stream: parked.stream, pipeline: pipeline, renewedInBand: true)
        // The parked stream had left the state for the renewal: a shutdown meanwhile found no
        // connection to close.
        try self.adopt(connection, counting: \.renewals, whileIt: "was restarting its session")
        self.configuration.tracer?.emit(.note("started a new session on \(self.transport) (in band, not reopened)"))
        return connection
    }

    /// Makes `connection` (just opened or renewed) the link's, and counts it in `counter`;
    /// unless the link was shut down meanwhile: that shutdown found no connection to close, so
    /// `connection` is closed here and the caller fails with `.shutDown`.
    private func adopt(
        _ connection: Connection,
        counting counter: WritableKeyPath<LinkState, Int>,
        whileIt doing: String
    ) throws(HTTPLinkError) {
        let shutDown = self.state.withLock { state in
            if !state.isShutDown {
                state.connection = connection
                state[keyPath: counter] += 1
            }
            return state.isShutDown
        }
        if shutDown {
            self.close(connection)
            throw HTTPLinkError(.shutDown, "the link was shut down while it \(doing)")
        }
    }

    /// The link is done with `connection`. A stream that can be renewed in band and is still
    /// open is kept for the next request; any other is closed.
    func forget(_ connection: Connection) {
        let stream = connection.stream
        let parks: Bool = self.state.withLock { state in
            if state.connection?.stream.channel === stream.channel { state.connection = nil }
            guard stream.renewal != nil, stream.channel.isActive, !state.isShutDown else { return false }
            if state.parked?.stream.channel !== stream.channel { state.parked = connection }
            return true
        }
        if !parks { self.close(connection) }
    }

    /// Closes `connection`'s stream; `shutdown` waits until the transport released it.
    func close(_ connection: Connection) {
        let stream = connection.stream
        let key = ObjectIdentifier(stream.channel)
        let isNew: Bool = self.state.withLock { state in
            if state.connection?.stream.channel === stream.channel { state.connection = nil }
            if state.parked?.stream.channel === stream.channel { state.parked = nil }
            return state.releasing.updateValue(stream, forKey: key) == nil
        }
        stream.channel.close(promise: nil)
        guard isNew else { return }
        Task {
            await stream.waitUntilReleased()
            self.state.withLock { _ = $0.releasing.removeValue(forKey: key) }
        }
    }
}
