import Glibc

/// Starts an OS thread for work that must block, such as waiting for a child process to exit.
/// NIO's thread pool is not used for that: a wait can last as long as the child runs and
/// would take one of the pool's few threads from everyone else. Shared with the USB and
/// FunctionFS transports (`package` access), whose transfer threads block in the kernel.
package enum DetachedThread {
    /// Runs `body` on a new detached thread.
    package static func start(_ body: @escaping @Sendable () -> Void) throws(Errno) {
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread,
            nil,
            { context in
                guard let context else { return nil }
                Unmanaged<Body>.fromOpaque(context).takeRetainedValue().run()
                return nil
            },
            context
        )
        guard result == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            throw Errno(rawValue: result)
        }
        pthread_detach(thread)
    }

    /// Carries the closure through `pthread_create`'s untyped context pointer.
    private final class Body: Sendable {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }
}
