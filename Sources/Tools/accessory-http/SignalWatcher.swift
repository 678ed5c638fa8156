import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Turns the first SIGINT or SIGTERM into a cancellation (so serial lines get their settings
/// back and child processes are reaped); a second one exits at once.
final class SignalWatcher {
    private let sources: [any DispatchSourceSignal]

    init(_ onSignal: @escaping @Sendable () -> Void) {
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            // The default action must be off before the source exists; on Linux, libdispatch
            // installs its own handler when the source resumes, and SIG_IGN set after that
            // would disable the source.
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            let seen = SignalCount()
            source.setEventHandler {
                if seen.increment() > 1 { _exit(130) }
                onSignal()
            }
            source.resume()
            waitForDispatchSignalHandler(number)
            sources.append(source)
        }
        self.sources = sources
    }

    func stop() {
        for source in self.sources { source.cancel() }
    }
}

private final class SignalCount: Sendable {
    private let count = Atomic<Int>(0)
    func increment() -> Int { self.count.add(1, ordering: .relaxed).newValue }
}

/// Returns once libdispatch has installed its handler for `number`, or after 2 s. libdispatch
/// registers a signal source on its manager thread some time after `resume()`: only then does
/// it replace SIG_IGN with its handler and open the signalfd (swift-corelibs-libdispatch,
/// event_epoll.c, `_dispatch_muxnote_create`). A signal that arrives before finds SIG_IGN and is
/// lost: a SIGHUP sent as soon as the bridge's socket answered was never seen, under load, and a
/// SIGTERM that early would not stop the process. Every source is created before this program
/// tells anyone it is ready, so waiting here closes that window.
func waitForDispatchSignalHandler(_ number: Int32) {
    let ignored = 1  // SIG_IGN, as glibc defines it: ((__sighandler_t) 1)
    let deadline = ContinuousClock.now.advanced(by: .seconds(2))
    var current = sigaction()
    while ContinuousClock.now < deadline {
        guard sigaction(number, nil, &current) == 0 else { return }
        if unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) != ignored { return }
        usleep(200)
    }
}
