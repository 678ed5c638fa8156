import AccessoryTransport
import NIOCore

/// The client connections a listener accepted that ``AccessoryBridge/run()`` has not taken yet,
/// held so that each one is ended through `executeThenClose`, however the bridge stops.
///
/// Why: NIO wraps an accepted connection (a `NIOAsyncChannel`) before it hands it to the
/// listener's stream, and drops it unread when the stream has already ended: the wrapping
/// finished just after the listener closed, or `run()` stopped reading. A `NIOAsyncChannel`
/// dropped without `executeThenClose` traps when it is deinitialized ("Deinited
/// NIOAsyncWriter without calling finish()"), so a client connecting as the bridge shuts down
/// (or a bridge shut down before, or without, `run()`) crashed the daemon. Holding each
/// connection here until it is claimed, and ending the rest in ``closeAll()``, keeps every one
/// alive until it is ended properly; after ``closeAll()`` a new connection is refused before it
/// is wrapped, so none slips in behind it.
final class UnclaimedConnections: Sendable {
    private struct State {
        var channels: [ObjectIdentifier: BridgeChannel] = [:]
        var closed = false
    }

    private let state = TrackedMutex(State())

    /// Connections accepted and not yet claimed.
    var count: Int { self.state.withLock { $0.channels.count } }

    /// Wraps an accepted connection with `wrap` and holds it; throws, without wrapping, once
    /// ``closeAll()`` has begun (the listener's initializer fails, and closes the channel).
    /// The wrapping runs under the lock so that ``closeAll()`` cannot miss one made meanwhile.
    func admit(_ channel: any Channel, wrap: (any Channel) throws -> BridgeChannel) throws -> BridgeChannel {
        try self.state.withLock { state throws -> BridgeChannel in
            guard !state.closed else { throw ChannelError.ioOnClosedChannel }
            let wrapped = try wrap(channel)
            state.channels[ObjectIdentifier(channel)] = wrapped
            return wrapped
        }
    }

    /// `run()` takes the connection to serve it: it is no longer held here.
    func claim(_ channel: BridgeChannel) {
        _ = self.state.withLock { $0.channels.removeValue(forKey: ObjectIdentifier(channel.channel)) }
    }

    /// Refuses connections from now on and ends every one still unclaimed (its client sees
    /// the connection close).
    func closeAll() async {
        let channels = self.state.withLock { state in
            state.closed = true
            defer { state.channels = [:] }
            return Array(state.channels.values)
        }
        for channel in channels { try? await channel.executeThenClose { _, _ in } }
    }
}
