import AccessoryEmulator
import AccessoryURLProtocol
import Foundation
import NIOPosix
import Synchronization
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// An `httpBodyStream` that blocks (a FIFO whose writer is there and silent: an app streaming
/// from a pipe or a process) must end at the request's timeout, must not take a thread of
/// Swift's cooperative pool while it blocks, and must leave the accessory answering.
@Suite("A quiet httpBodyStream", .serialized, .timeLimit(.minutes(1)))
struct QuietBodyStreamTests {
    /// Four uploads at once (twice the cooperative pool's threads on a two-core machine), each
    /// to an accessory of its own, each from the same quiet FIFO.
    static let names = (0..<4).map { "quiet-body-\($0)" }

    static let setUp: Void = {
        for name in QuietBodyStreamTests.names {
            AccessoryRouteTable.shared.add(
                AccessoryRoute(
                    name: name,
                    transport: EmulatedAccessory().socketPairTransport(on: MultiThreadedEventLoopGroup.singleton)
                )
            )
        }
    }()

    /// A PUT to `name`'s `/upload` whose body is read from `fifo`.
    static func upload(to name: String, from fifo: QuietFIFO, timeout: TimeInterval) throws -> URLRequest {
        _ = Self.setUp
        var request = URLRequest(url: try Fixture.url("accessory://\(name)/upload"))
        request.httpMethod = "PUT"
        request.timeoutInterval = timeout
        request.httpBodyStream = InputStream(fileAtPath: fifo.path)
        return request
    }

    @Test("several at once end with URLError.timedOut at a 1 s timeout, and each accessory answers next")
    func quietStreamsEndAtTheirTimeout() async throws {
        let quiet = try QuietFIFO()
        defer { quiet.end() }
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let started = ContinuousClock.now
        let outcomes = try await withThrowingTaskGroup(of: URLError.Code?.self) { group in
            for name in Self.names {
                let request = try Self.upload(to: name, from: quiet, timeout: 1)
                group.addTask {
                    do {
                        _ = try await session.data(for: request)
                        return nil
                    } catch let error as URLError {
                        return error.code
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let elapsed = ContinuousClock.now - started
        #expect(outcomes == Array(repeating: .timedOut, count: Self.names.count))
        #expect(elapsed < .seconds(4), "the quiet uploads took \(elapsed)")

        for name in Self.names {
            let asked = ContinuousClock.now
            let (data, response) = try await session.data(from: try Fixture.url("accessory://\(name)/status"))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(try json(data)["model"] as? String == "AH-EMU-1")
            #expect(ContinuousClock.now - asked < .seconds(2), "\(name) answered after \(ContinuousClock.now - asked)")
        }
    }
}

extension QuietBodyStreamTests {
    @Test(
        "a task cancelled while its body stream is quiet ends with URLError.cancelled at once, and the accessory answers next"
    )
    func cancelledWhileQuiet() async throws {
        let quiet = try QuietFIFO()
        defer { quiet.end() }
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let name = Self.names[0]
        let request = try Self.upload(to: name, from: quiet, timeout: 30)
        let upload = Task { try await session.data(for: request) }
        try await Task.sleep(for: .milliseconds(300))
        let cancelled = ContinuousClock.now
        upload.cancel()
        let outcome = await upload.result
        #expect(
            ContinuousClock.now - cancelled < .seconds(2),
            "the cancelled upload ended after \(ContinuousClock.now - cancelled)"
        )
        switch outcome {
        case .success: Issue.record("the upload from a quiet stream was answered")
        case .failure(let error): #expect((error as? URLError)?.code == .cancelled, "\(error)")
        }
        let asked = ContinuousClock.now
        let (data, _) = try await session.data(from: try Fixture.url("accessory://\(name)/status"))
        #expect(try json(data)["model"] as? String == "AH-EMU-1")
        #expect(ContinuousClock.now - asked < .seconds(2))
    }
}

/// A FIFO with a writer that never writes (O_RDWR opens a FIFO without waiting for a reader).
/// The writer is closed by ``end()`` or, at the latest, by a thread outside Swift's pool after
/// 10 s, so that a build whose reads block that pool still gets to fail its test instead of
/// hanging the run. After the writer is closed, a writer is opened and closed every 100 ms for
/// 10 s: a reader still waiting in `open(2)` for a writer (an `InputStream` opened after the
/// first writer left) gets one and then reads the end, so no thread stays blocked on the FIFO.
final class QuietFIFO: Sendable {
    let path = NSTemporaryDirectory() + "quiet-body-\(UUID().uuidString)"
    private let writer: CInt
    private let closed = Mutex(false)

    init() throws {
        guard mkfifo(self.path, 0o600) == 0 else { throw FixtureError("mkfifo \(self.path) failed: errno \(errno)") }
        self.writer = open(self.path, O_RDWR | O_CLOEXEC)
        guard self.writer >= 0 else {
            unlink(self.path)
            throw FixtureError("open \(self.path) failed: errno \(errno)")
        }
        Thread { [self] in
            Thread.sleep(forTimeInterval: 10)
            self.closeWriter()
        }.start()
    }

    /// Closes the writer (the readers get the end) and removes the FIFO.
    func end() {
        self.closeWriter()
        unlink(self.path)
    }

    private func closeWriter() {
        let first = self.closed.withLock { closed in
            defer { closed = true }
            return !closed
        }
        guard first else { return }
        _ = Glibc.close(self.writer)
        let path = self.path
        Thread {
            for _ in 0..<100 {
                let writer = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
                if writer < 0 { return }  // unlinked: no new reader can open it
                _ = Glibc.close(writer)
                Thread.sleep(forTimeInterval: 0.1)
            }
        }.start()
    }
}
