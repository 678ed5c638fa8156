import NIOCore

/// A `TaskExecutor` that runs Swift concurrency jobs on one NIO event loop's thread.
///
/// A link's async code runs with this as its task executor preference
/// (`withTaskExecutorPreference`): NIO reads a response on the event loop, the request that
/// waits for it resumes on the same thread, and so does the next request's write. Without it,
/// every step of an exchange crosses between the event loop and the concurrency pool, and each
/// crossing is a thread wake-up (an `eventfd` or futex write and a context switch) that costs
/// more than parsing a small response.
///
/// Code that runs with this preference must not block: while it does, the event loop serves no
/// other channel.
public final class EventLoopTaskExecutor: TaskExecutor {
    /// The event loop whose thread runs the jobs.
    public let eventLoop: any EventLoop

    /// An executor that runs jobs on `eventLoop`'s thread.
    ///
    /// - Parameter eventLoop: The event loop whose thread runs the jobs.
    public init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// Schedules `job` to run on the event loop's thread (with `EventLoop.execute`).
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        self.eventLoop.execute {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }
}
