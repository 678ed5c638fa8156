import AccessoryTransport
import AccessoryURLProtocol
import Foundation
import Synchronization
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Routes each task's outcome to its own completion closure, for delegate-based stress tasks.
final class StressDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // `@unchecked Sendable`: all state is inside the Mutex.
    private let state = TrackedMutex<[Int: (data: Data, done: @Sendable (Data, (any Error)?) -> Void)]>([:])

    func track(_ task: URLSessionTask, _ done: @escaping @Sendable (Data, (any Error)?) -> Void) {
        self.state.withLock { $0[task.taskIdentifier] = (Data(), done) }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        self.state.withLock { $0[dataTask.taskIdentifier]?.data.append(data) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let entry = self.state.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        let error = error
        entry.done(entry.data, error)
    }
}

@Suite("Stress")
struct StressTests {
    struct Outcome: Sendable {
        let expected: String
        let cancelled: Bool
        let sha: String?
        let errorCode: Int?
        let errorText: String?
    }

    @Test("200 concurrent tasks per round, 20 rounds, half cancelled at random moments: no crash, exact bodies")
    func stress() async throws {
        let delegate = StressDelegate()
        let handlerSession = Fixture.session()
        let delegateSession = Fixture.session(delegate: delegate)
        defer {
            handlerSession.finishTasksAndInvalidate()
            delegateSession.finishTasksAndInvalidate()
        }
        var expectedByCount: [Int: String] = [:]
        var failures: [String] = []
        var completedUncancelled = 0
        for round in 0..<20 {
            let outcomes: [Outcome] = try await withThrowingTaskGroup(of: Outcome.self) { group in
                for index in 0..<200 {
                    let count = Int.random(in: 1024...(64 * 1024))
                    let expected = expectedByCount[count] ?? patternSHA256(count: count)
                    expectedByCount[count] = expected
                    let kind = Bool.random() ? "bytes" : "stream"
                    let url = try Fixture.url("accessory://\(Fixture.names[index % 4])/\(kind)/\(count)")
                    let cancel = index % 2 == 0
                    let delay = Double.random(in: 0...0.03)
                    let useDelegate = index % 4 >= 2
                    group.addTask {
                        let (data, error): (Data?, (any Error)?) = await withCheckedContinuation { continuation in
                            let task: URLSessionDataTask
                            if useDelegate {
                                task = delegateSession.dataTask(with: url)
                                delegate.track(task) { data, error in continuation.resume(returning: (data, error)) }
                            } else {
                                task = handlerSession.dataTask(with: url) { data, _, error in
                                    let result = (data, error)
                                    continuation.resume(returning: result)
                                }
                            }
                            task.resume()
                            if cancel {
                                let target = task
                                DispatchQueue.global().asyncAfter(deadline: .now() + delay) { target.cancel() }
                            }
                        }
                        let nsError = error.map { $0 as NSError }
                        return Outcome(
                            expected: expected,
                            cancelled: cancel,
                            sha: error == nil ? data.map(sha256) : nil,
                            errorCode: nsError?.code,
                            errorText: error.map { "\($0)" }
                        )
                    }
                }
                var all: [Outcome] = []
                for try await outcome in group { all.append(outcome) }
                return all
            }
            for outcome in outcomes {
                if let code = outcome.errorCode {
                    if !(outcome.cancelled && code == URLError.cancelled.rawValue) {
                        failures.append("round \(round): unexpected error \(outcome.errorText ?? "")")
                    }
                } else if outcome.sha != outcome.expected {
                    failures.append("round \(round): wrong body")
                } else if !outcome.cancelled {
                    completedUncancelled += 1
                }
            }
        }
        #expect(failures.isEmpty, "\(failures.prefix(5))")
        #expect(completedUncancelled == 20 * 100)
    }
}
