import NIOCore

/// Making a handler outside ``TLSTransport``, and the errors for a link that ended early.
extension TLSHandler {
    /// A handler for a server (or client) connection, for pipelines built without
    /// ``TLSTransport`` (a listening socket's child channels, for instance). Add it with
    /// ``add(to:)``.
    public static func make(context: TLSServerContext, eventLoop: any EventLoop) throws(TLSError) -> TLSHandler {
        let connection = try TLSConnection(context: context.context)
        return TLSHandler(
            connection: connection,
            configuration: context.context.configuration,
            handshakePromise: eventLoop.makePromise()
        )
    }

    var peerName: String { self.configuration.role == .client ? "accessory" : "client" }

    /// The end of input came without close_notify: OpenSSL's verdict on it.
    func truncationError() -> TLSError {
        // Let OpenSSL judge the end of input: it reports SSL_R_UNEXPECTED_EOF_WHILE_READING.
        self.connection.markEndOfInput()
        var scratch = ByteBufferAllocator().buffer(capacity: 0)
        if case .failed(let error) = self.connection.read(into: &scratch) { return error }
        return TLSError(
            .truncated,
            "the \(self.peerName) closed the link without a TLS close_notify; data may have been cut off"
        )
    }

    /// The input ended before the handshake did: OpenSSL's verdict on what it has (an alert
    /// the peer sent, say), else that the peer closed the link.
    func handshakeCutShort() -> TLSError {
        self.connection.markEndOfInput()
        if case .failed(let failure) = self.connection.handshake() { return failure }
        return TLSError(.closedDuringHandshake, "the \(self.peerName) closed the link during the TLS handshake")
    }
}
