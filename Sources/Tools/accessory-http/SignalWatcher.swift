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
