import NIOCore

extension OpenedByteStream {
    /// Awaits `step`, a step of opening this stream that a layer above runs on it (a session's
    /// HELLO, a TLS handshake). If it fails, or the caller is cancelled, the stream is closed and
    /// the transport has released what it held (an `exec:` child reaped, a serial line's
    /// settings restored) before this throws: an open that fails leaves nothing behind, and a
    /// shutdown that cancels one can count on that. A `Failure` is then rewritten by `explain`
    /// with what the transport knows (``diagnostics()``: a child's exit status and stderr…).
    package func awaitOpeningStep<Value: Sendable, Failure: Error>(
        _ step: EventLoopFuture<Value>,
        explaining _: Failure.Type,
        with explain: (Failure, _ diagnostics: String) -> Failure
    ) async throws -> Value {
        do {
            return try await withTaskCancellationHandler {
                try await step.get()
            } onCancel: {
                self.channel.close(promise: nil)
            }
        } catch let error as Failure {
            self.channel.close(promise: nil)
            await self.waitUntilReleased()
            if let diagnostics = await self.diagnostics() { throw explain(error, diagnostics) }
            throw error
        } catch {
            self.channel.close(promise: nil)
            await self.waitUntilReleased()
            throw error
        }
    }
}
