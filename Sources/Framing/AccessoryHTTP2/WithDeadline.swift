import AccessoryHTTP1

/// Runs `body`, ending it with `HTTPLinkError(.exchangeTimeout)` when `deadline` passes. Work
/// that ignores its cancellation and still succeeds after the deadline (an open that makes a
/// child process or claims an interface) hands its result to `discardLate`, which closes it.
func withDeadline<Result: Sendable>(
    _ deadline: ContinuousClock.Instant,
    discardLate: (Result) -> Void = { _ in },
    _ body: () async throws -> Result
) async throws -> Result {
    try await withoutActuallyEscaping(body) { body in
        let work = UncheckedWork(body: body)
        return try await withThrowingTaskGroup(of: Result?.self) { group in
            group.addTask { try await work.body() }
            group.addTask {
                try await Task.sleep(until: deadline, clock: .continuous)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw CancellationError() }
            guard let result = first else {
                group.cancelAll()
                while true {
                    do {
                        guard let late = try await group.next() else { break }
                        if let late { discardLate(late) }
                    } catch {
                        continue  // the work failed as it was cancelled: nothing to close
                    }
                }
                throw HTTPLinkError(.exchangeTimeout, "the exchange took longer than its deadline")
            }
            return result
        }
    }
}

/// The caller's work, run in the one child task of ``withDeadline(_:_:)``.
private struct UncheckedWork<Result: Sendable>: @unchecked Sendable {
    // @unchecked: the closure runs in exactly one child task, and the caller does nothing but
    // wait for that task (the group is awaited before `withDeadline` returns), so it never runs
    // at the same time as the code that made it, and never after it returned.
    let body: () async throws -> Result
}
