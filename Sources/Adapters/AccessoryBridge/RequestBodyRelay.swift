import AccessoryTransport
import HTTPTypes
import NIOCore
import Synchronization

/// Hands a client's request body, part by part, from the connection's task (which reads the
/// client) to the link's body producer, one part at a time: ``send(_:)`` returns only once the
/// part is taken, so a slow accessory slows the client down instead of filling memory.
final class RequestBodyRelay: Sendable {
    private enum State {
        case idle
        /// A part waits for the consumer; its sender waits for it to be taken.
        case offered(ByteBuffer, CheckedContinuation<Bool, Never>)
        /// The consumer waits for a part.
        case waiting(CheckedContinuation<ByteBuffer?, any Error>)
        case finished
        case failed(any Error)
        /// The consumer is gone (the exchange ended): parts are no longer taken.
        case closed
    }

    private let state = TrackedMutex(State.idle)
    /// The trailer fields that ended the client's body, if any.
    private let trailerFields = TrackedMutex<HTTPFields?>(nil)
    /// Called once, before the first part is asked for (the bridge sends `100 Continue` then).
    private let beforeFirstPull: TrackedMutex<(@Sendable () async throws -> Void)?>

    init(beforeFirstPull: (@Sendable () async throws -> Void)? = nil) {
        self.beforeFirstPull = TrackedMutex(beforeFirstPull)
    }

    /// Whether the whole body arrived (the client sent its end).
    var isFinished: Bool {
        self.state.withLock { if case .finished = $0 { true } else { false } }
    }

    /// Offers `part`; returns whether the consumer took it (false once it is gone).
    func send(_ part: ByteBuffer) async -> Bool {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (sender: CheckedContinuation<Bool, Never>) in
                let action: (() -> Void)? = self.state.withLock { state in
                    switch state {
                    case .waiting(let consumer):
                        state = .idle
                        return {
                            consumer.resume(returning: part)
                            sender.resume(returning: true)
                        }
                    case .idle:
                        state = .offered(part, sender)
                        return nil
                    case .offered, .finished, .failed, .closed:
                        return { sender.resume(returning: false) }
                    }
                }
                action?()
            }
        } onCancel: {
            self.close()
        }
    }

    /// The body is complete; `trailers` followed it (a chunked body's trailer section).
    func finish(trailers: HTTPFields? = nil) {
        if let trailers, !trailers.isEmpty { self.trailerFields.withLock { $0 = trailers } }
        self.end(.finished)
    }

    /// The trailer fields that followed the body; known once ``next()`` returned `nil`.
    var trailers: HTTPFields? { self.trailerFields.withLock { $0 } }

    /// The body will not be complete: the client went away or sent something invalid.
    func fail(_ error: any Error) {
        self.end(.failed(error))
    }

    private func end(_ final: State) {
        let consumer: CheckedContinuation<ByteBuffer?, any Error>? = self.state.withLock { state in
            switch state {
            case .waiting(let consumer):
                state = final
                return consumer
            case .idle:
                state = final
                return nil
            case .offered, .finished, .failed, .closed:
                return nil
            }
        }
        switch final {
        case .failed(let error): consumer?.resume(throwing: error)
        default: consumer?.resume(returning: nil)
        }
    }

    /// The consumer is gone: a part on offer is refused, and every later one.
    func close() {
        typealias Waiters = (CheckedContinuation<Bool, Never>?, CheckedContinuation<ByteBuffer?, any Error>?)
        let (sender, consumer): Waiters = self.state.withLock { state in
            switch state {
            case .offered(_, let sender):
                state = .closed
                return (sender, nil)
            case .waiting(let consumer):
                state = .closed
                return (nil, consumer)
            case .idle:
                state = .closed
                return (nil, nil)
            case .finished, .failed, .closed:
                return (nil, nil)
            }
        }
        sender?.resume(returning: false)
        consumer?.resume(throwing: CancellationError())
    }

    /// The next part, or nil at the end of the body.
    func next() async throws -> ByteBuffer? {
        if let first = self.beforeFirstPull.withLock({ hook -> (@Sendable () async throws -> Void)? in
            defer { hook = nil }
            return hook
        }) {
            try await first()
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (consumer: CheckedContinuation<ByteBuffer?, any Error>) in
                let action: (() -> Void) = self.state.withLock { state in
                    switch state {
                    case .offered(let part, let sender):
                        state = .idle
                        return {
                            sender.resume(returning: true)
                            consumer.resume(returning: part)
                        }
                    case .idle:
                        state = .waiting(consumer)
                        return {}
                    case .waiting:
                        return { consumer.resume(throwing: CancellationError()) }
                    case .finished:
                        return { consumer.resume(returning: nil) }
                    case .failed(let error):
                        return { consumer.resume(throwing: error) }
                    case .closed:
                        return { consumer.resume(throwing: CancellationError()) }
                    }
                }
                action()
            }
        } onCancel: {
            self.close()
        }
    }
}
