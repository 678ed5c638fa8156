import NIOCore

/// Starts a new, clean stream on a channel that stays open, and installs the layer above on it
/// with `configure` (which runs on the channel's event loop, as in
/// ``ByteStreamTransport/open(on:configure:)``). Returns once the new stream is ready.
///
/// The caller first removes every handler it added above the stream, and sends
/// ``ByteStreamEndRequest`` when it gives the stream up. On failure the caller closes the channel.
public typealias StreamRenewal =
    @Sendable (_ configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>) async throws -> Void

/// An outbound user event: the layer above is done with the current stream and will either
/// renew it (``OpenedByteStream/renewal``) or close the channel.
///
/// A layer that can start a new stream on the same transport (the session layer) ends the
/// current one with its peer (so that the peer stops sending at once), drops whatever arrives
/// for it, keeps the channel open, and succeeds the event's promise. A pipeline with no such
/// layer fails the promise (the channel's head does not know the event); the sender then closes
/// the channel, as it would have without the event.
public struct ByteStreamEndRequest: Sendable, Hashable {
    /// The event; it carries nothing.
    public init() {}
}

extension OpenedByteStream {
    /// Like ``renewal``, called: a new stream on the same channel, and also returns what
    /// `configure` built in the pipeline, as ``ByteStreamTransport/open(on:building:)`` does.
    ///
    /// - Throws: ``TransportError`` (``TransportError/Code/openFailed``) if the stream cannot be
    ///   renewed in band; what the renewal or `configure` throws.
    public func renew<Output: Sendable>(
        building configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Output>
    ) async throws -> Output {
        guard let renewal = self.renewal else {
            throw TransportError(.openFailed, "this stream cannot be renewed in band; open the transport again")
        }
        let built = BuiltOutput<Output>()
        try await renewal { channel in configure(channel).map { built.store($0) } }
        guard let output = built.take() else {
            throw TransportError(.openFailed, "the stream was renewed without running the pipeline set-up")
        }
        return output
    }
}

/// An error of a layer between the transport and HTTP (the session layer) that ended the stream
/// an exchange ran on: a damaged frame, a peer found dead; or the HTTP/2 link's own finding that
/// the device's HTTP/2 side stopped answering. The HTTP link reports it as the link
/// closing (`link-closed`, this error underneath), so that an idempotent request of which not
/// one response byte had arrived is sent once more on the next stream, as for a kept-alive
/// connection the device closed (docs/protocol.md).
public protocol StreamEndingError: AccessoryError {}
