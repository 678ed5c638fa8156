import AccessoryBridge
import AccessoryTestSupport
import AccessoryTransport
import Glibc
import Testing

/// The bridge's answers a client can act on (502, 503, 504), clients that vanish mid-answer,
/// shutdown and ownership (issue 11). Every fault is followed by another request that must be
/// answered within its bound.
@Suite("The bridge under faults")
struct BridgeFaultTests {
    static let curl = "/usr/bin/curl"

    private func curl(_ arguments: [String], _ fixture: BridgeFixture) async throws -> (status: CInt, output: String) {
        try #require(access(Self.curl, X_OK) == 0, "curl is not installed at \(Self.curl); run scripts/bootstrap")
        return try await run(
            [Self.curl, "-sS", "--max-time", "60"] + arguments,
            in: fixture.directory,
            timeout: .seconds(90)
        )
    }

    /// `GET /status` through the unix socket: its answer and how long it took.
    private func status(_ fixture: BridgeFixture) async throws -> (output: String, elapsed: Duration) {
        let started = ContinuousClock.now
        let (_, output) = try await self.curl(
            ["-i", "--unix-socket", fixture.socket, "http://accessory/status"],
            fixture
        )
        return (output, ContinuousClock.now - started)
    }

    @Test("an accessory that is not there: 502 saying why")
    func absentAccessory() async throws {
        let transport = try DeviceSpec(parsing: "unix:/nonexistent/accessory.sock").makeTransport()
        try await withBridge(transport: transport) { fixture in
            for _ in 0..<2 {
                let (output, elapsed) = try await self.status(fixture)
                #expect(output.hasPrefix("HTTP/1.1 502"), "\(output)")
                #expect(output.contains("/nonexistent/accessory.sock"), "the 502 does not say what failed: \(output)")
                #expect(elapsed < TimeBounds.scaled(.seconds(5)))
            }
            let document = try await self.curl(
                ["--unix-socket", fixture.socket, "http://accessory/.well-known/accessory-http/status"],
                fixture
            )
            #expect(document.output.contains("\"accessory-unreachable\":2"), "\(document.output)")
            #expect(document.output.contains("\"lastError\":"), "\(document.output)")
        }
    }

    @Test("a request that waits longer than the queue timeout: 503 with Retry-After, then served")
    func queueTimeout() async throws {
        // The slow request must still hold the link when the second one queues: under a
        // sanitizer, starting curl for the second took long enough that a 2 s delay had ended
        // (CI of 42802de: 200, not 503).
        let hold = TimeBounds.sanitized ? 8 : 2
        try await withBridge(configure: { $0.queueTimeout = .milliseconds(300) }) { fixture in
            let slow = try Subprocess(
                [
                    Self.curl, "-sS", "--max-time", "30", "--unix-socket", fixture.socket,
                    "http://accessory/delay/\(hold)",
                ],
                logPath: fixture.directory.path("slow.log")
            )
            defer { slow.stop() }
            let busy = await waitUntil(timeout: .seconds(10)) { fixture.bridge.status.active == 1 }
            try #require(busy, "the slow request did not reach the link")
            let (output, elapsed) = try await self.status(fixture)
            #expect(output.hasPrefix("HTTP/1.1 503"), "\(output)")
            #expect(output.lowercased().contains("retry-after: 2"), "\(output)")
            #expect(elapsed < TimeBounds.scaled(.seconds(2)), "the 503 took \(elapsed)")
            let slowStatus = await slow.wait(timeout: .seconds(30))
            #expect(slowStatus == 0, "the slow request failed: \(slow.log)")
            let (after, _) = try await self.status(fixture)
            #expect(after.hasPrefix("HTTP/1.1 200") && after.contains("EMU0001"), "\(after)")
        }
    }

    @Test("an accessory too slow to begin its answer: 504 by the response timeout, then the next request is answered")
    func responseTimeout() async throws {
        try await withBridge(configure: { $0.responseTimeout = TimeBounds.scaled(.seconds(1)) }) { fixture in
            for _ in 0..<4 {
                let started = ContinuousClock.now
                let (_, output) = try await self.curl(
                    ["-i", "--unix-socket", fixture.socket, "http://accessory/delay/30"],
                    fixture
                )
                let elapsed = ContinuousClock.now - started
                #expect(output.hasPrefix("HTTP/1.1 504"), "\(output)")
                #expect(elapsed < TimeBounds.scaled(.seconds(3)), "the 504 took \(elapsed)")
                let (next, nextElapsed) = try await self.status(fixture)
                #expect(next.hasPrefix("HTTP/1.1 200") && next.contains("EMU0001"), "\(next)")
                #expect(nextElapsed < TimeBounds.scaled(.seconds(2)), "the next answer took \(nextElapsed)")
            }
        }
    }

    @Test("an upload slower than the response timeout is not taken for a silent accessory")
    func slowUploadIsNotCut() async throws {
        try await withBridge(configure: { $0.responseTimeout = TimeBounds.scaled(.seconds(1)) }) { fixture in
            let file = fixture.directory.path("slow-upload.bin")
            try writeFile(file, [UInt8](repeating: 0x5A, count: 3 << 20))
            let started = ContinuousClock.now
            let (status, output) = try await self.curl(
                [
                    "--limit-rate", "1M", "--unix-socket", fixture.socket, "--data-binary", "@\(file)",
                    "http://accessory/upload",
                ],
                fixture
            )
            let elapsed = ContinuousClock.now - started
            #expect(status == 0 && output.contains("\"length\":\(3 << 20)"), "\(output)")
            #expect(elapsed > .seconds(2), "the upload was not slow (\(elapsed)): the test shows nothing")
        }
    }

    @Test("20 clients killed mid-download in a row: the next request gets its own answer every time")
    func killedClients() async throws {
        try await withBridge { fixture in
            var slowest = Duration.zero
            for round in 0..<20 {
                let file = fixture.directory.path("partial-\(round).bin")
                let download = try Subprocess(
                    [
                        Self.curl, "-sS", "--unix-socket", fixture.socket, "-o", file,
                        "http://accessory/bytes/8000000000",
                    ],
                    logPath: fixture.directory.path("download-\(round).log")
                )
                let started = await waitUntil(timeout: .seconds(20)) {
                    var info = stat()
                    return stat(file, &info) == 0 && info.st_size >= 1 << 20
                }
                kill(download.pid, SIGKILL)
                download.stop()
                try #require(started, "round \(round): the download did not start: \(download.log)")
                unlink(file)
                let (_, echo) = try await self.curl(
                    ["--unix-socket", fixture.socket, "http://accessory/echo?round=\(round)"],
                    fixture
                )
                #expect(echo.contains("\"path\":\"/echo?round=\(round)\""), "round \(round): \(echo)")
                let (output, elapsed) = try await self.status(fixture)
                #expect(output.hasPrefix("HTTP/1.1 200") && output.contains("EMU0001"), "round \(round): \(output)")
                slowest = max(slowest, elapsed)
            }
            #expect(slowest < TimeBounds.scaled(.seconds(2)), "the slowest /status after a kill took \(slowest)")
            print(
                "bridge: 20 killed downloads; slowest next /status \(slowest); link opened \(fixture.bridge.status.linkOpens) times"
            )
            #expect(fixture.bridge.status.errors["client-gone", default: 0] >= 20, "\(fixture.bridge.status.errors)")
        }
    }

    /// A client killed while the accessory has not begun its answer (nothing to write, so no
    /// failed write tells) is given up when its connection closes: the next client's answer
    /// does not wait for the device or the link's idle timeout (30 s). 16 tries.
    @Test("16 clients killed while the accessory is silent: the next request is answered at once")
    func killedWhileWaitingForTheHead() async throws {
        try await withBridge { fixture in
            var times: [Duration] = []
            for round in 0..<16 {
                let waiting = try Subprocess(
                    [Self.curl, "-sS", "--unix-socket", fixture.socket, "http://accessory/delay/60"],
                    logPath: fixture.directory.path("waiting-\(round).log")
                )
                let admitted = await waitUntil(timeout: TimeBounds.scaled(.seconds(10))) {
                    fixture.bridge.status.active == 1
                }
                kill(waiting.pid, SIGKILL)
                waiting.stop()
                try #require(admitted, "round \(round): the request never reached the link: \(waiting.log)")
                let (output, elapsed) = try await self.status(fixture)
                #expect(output.hasPrefix("HTTP/1.1 200") && output.contains("EMU0001"), "round \(round): \(output)")
                times.append(elapsed)
            }
            // Judged by the median and the slowest: alone each takes 20-55 ms; beside the other
            // interop suites (nginx, h2load) one curl took 1.07 s to start and answer once. Before
            // the fix, each waited for the link's idle timeout (30 s).
            times.sort()
            #expect(times[times.count / 2] < TimeBounds.scaled(.milliseconds(500)), "next /status times: \(times)")
            #expect(times[times.count - 1] < TimeBounds.scaled(.seconds(3)), "next /status times: \(times)")
            print(
                "bridge: 16 clients killed while the accessory was silent; next /status median \(times[times.count / 2]), slowest \(times[times.count - 1])"
            )
        }
    }

    @Test("shutdown lets an exchange under way finish, then refuses new connections")
    func gracefulShutdown() async throws {
        let fixture = try await BridgeFixture()
        let slow = try Subprocess(
            [Self.curl, "-sS", "--max-time", "30", "--unix-socket", fixture.socket, "http://accessory/delay/1"],
            logPath: fixture.directory.path("slow.log")
        )
        defer { slow.stop() }
        let busy = await waitUntil(timeout: .seconds(10)) { fixture.bridge.status.active == 1 }
        #expect(busy)
        let started = ContinuousClock.now
        let socket = fixture.socket
        await fixture.bridge.shutdown()
        let elapsed = ContinuousClock.now - started
        #expect(!unixSocketAccepts(socket), "the listener still accepts after shutdown")
        let status = await slow.wait(timeout: .seconds(10))
        #expect(status == 0, "the exchange under way did not finish: \(slow.log)")
        #expect(slow.log.contains("\"delay\""), "the exchange under way was not answered: \(slow.log)")
        #expect(elapsed < TimeBounds.scaled(.seconds(3)), "shutdown took \(elapsed)")
        await fixture.stop()
    }

    @Test("a second owner of the same accessory is told who owns it")
    func ownership() throws {
        let directory = try TemporaryDirectory("owner")
        defer { directory.remove() }
        let first = try DeviceOwnership(device: "usb:1209:0001", directory: directory.path(""))
        do {
            _ = try DeviceOwnership(device: "usb:1209:0001", directory: directory.path(""))
            Issue.record("a second owner was let in")
        } catch {
            #expect(error.code == .alreadyOwned)
            #expect(error.message.contains("PID \(getpid())"), "\(error.message)")
        }
        first.release()
        let second = try DeviceOwnership(device: "usb:1209:0001", directory: directory.path(""))
        second.release()
    }
}
