import NIOCore

/// Runs a transport's pipeline set-up (`configure`) inside a `NIOPipeBootstrap` without letting
/// it fail there.
///
/// When a pipe bootstrap's channel initializer fails, NIO (2.101) closes the descriptors itself,
/// although its documentation says the caller still owns them, and its
/// `takingOwnershipOfDescriptor(inputOutput:)` then traps closing its duplicate a second time: a
/// layer whose set-up failed (a handler that could not be added) crashed the process. So the
/// failure is kept here and the bootstrap succeeds; ``check(_:)`` then closes the channel (NIO
/// owns the descriptors by then, and closes them with it) and throws the failure.
package final class PipeSetUp: Sendable {
    private let failure = TrackedMutex<(any Error)?>(nil)
    private let configure: @Sendable (any Channel) -> EventLoopFuture<Void>

    package init(_ configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>) {
        self.configure = configure
    }

    /// The initializer to give the bootstrap.
    package var initializer: @Sendable (any Channel) -> EventLoopFuture<Void> {
        { channel in
            self.configure(channel).flatMapError { error in
                self.failure.withLock { $0 = error }
                return channel.eventLoop.makeSucceededVoidFuture()
            }
        }
    }

    /// Throws what the set-up failed with, once `channel` (which the bootstrap made) is closed;
    /// returns if it succeeded.
    package func check(_ channel: any Channel) async throws {
        guard let error = self.failure.withLock({ $0 }) else { return }
        try? await channel.close()
        throw error
    }
}
