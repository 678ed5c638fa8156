import AccessoryTestSupport
import AccessoryTransport
import AccessoryURLProtocol
import Foundation
import FoundationNetworking
import Glibc
import Testing

/// The same URLSession calls against the same nginx, once through FoundationNetworking's own
/// HTTP stack over TCP (the reference) and once through `AccessoryURLProtocol` over nginx's unix
/// socket. Every case where the two differ is listed; a difference that is not in
/// ``allowList`` (each entry naming a FoundationNetworking limit or a deliberate choice,
/// documented in AccessoryURLProtocol.docc/URLSessionOnLinux.md) fails the test, and so does an entry that no longer
/// differs. After each case, a plain `GET /small.txt` must be answered, and through the
/// accessory link within 50 ms of being sent (the median over the cases; none over 500 ms).
@Suite(.serialized, .timeLimit(.minutes(3)))
struct URLSessionDifferentialTests {
    /// What one case did, in terms both stacks can be compared on.
    struct Outcome: CustomStringConvertible {
        /// "200", "URLError -1001", or "no answer within Ns".
        var result: String
        var seconds: Double
        var bodyLength: Int?
        /// The `GET /small.txt` that follows: its result and how long it took.
        var next: String
        var nextSeconds: Double

        func matches(_ other: Outcome) -> Bool {
            // Within 0.6 s of each other; 2 s under a sanitizer, where the accessory's side took
            // 0.9 s for a small file against 0.1 s (CI, AddressSanitizer).
            let slack = TimeBounds.sanitized ? 2.0 : 0.6
            return self.result == other.result && abs(self.seconds - other.seconds) < slack
                && self.bodyLength == other.bodyLength
                && self.next == other.next && abs(self.nextSeconds - other.nextSeconds) < slack
        }

        var description: String {
            let body = self.bodyLength.map { ", \($0) B" } ?? ""
            return
                "\(self.result) after \(Self.format(self.seconds))\(body); then \(self.next) in \(Self.format(self.nextSeconds))"
        }

        static func format(_ seconds: Double) -> String {
            seconds < 0.1 ? "\(Int(seconds * 1000)) ms" : String(format: "%.1f s", seconds)
        }
    }

    /// One way of calling URLSession.
    struct Case: Sendable {
        let name: String
        var path: String
        var requestTimeout: TimeInterval?
        var configureRequestTimeout: TimeInterval?
        var configureResourceTimeout: TimeInterval?
        var headers: [String: String] = [:]
        /// Cancel the task this long after it started.
        var cancelAfter: Duration?
        /// Stop waiting after this long (a stack that hangs).
        var watchdog: Duration = .seconds(8)
    }

    static let cases: [Case] = [
        Case(name: "a small file", path: "/small.txt"),
        Case(name: "a stalled answer, request.timeoutInterval 2", path: "/stall", requestTimeout: 2),
        Case(name: "a stalled answer, timeoutIntervalForRequest 2", path: "/stall", configureRequestTimeout: 2),
        Case(
            name: "a stalled answer, request 3 s over configuration 1 s",
            path: "/stall",
            requestTimeout: 3,
            configureRequestTimeout: 1
        ),
        Case(name: "a 10 kB/s body cancelled after 2.5 s", path: "/slow.bin", cancelAfter: .milliseconds(2500)),
        Case(
            name: "a 10 kB/s body, timeoutIntervalForResource 3",
            path: "/slow.bin",
            configureResourceTimeout: 3,
            watchdog: .seconds(6)
        ),
        Case(
            name: "a gzip-able text, Accept-Encoding set by the app",
            path: "/text.txt",
            headers: ["Accept-Encoding": "gzip"]
        ),
        Case(name: "a gzip-able text", path: "/text.txt"),
    ]

    /// Differences that are known and accepted: the case's name and why.
    static let allowList: [String: String] = [
        "a 10 kB/s body, timeoutIntervalForResource 3":
            "FoundationNetworking's own stack never ends the load at timeoutIntervalForResource (it hangs); the accessory link ends it with URLError.timedOut at 3 s"
    ]

    /// Runs `test` with a fresh session, then `GET /small.txt` on the same session.
    static func run(_ test: Case, base: String, makeSession: (URLSessionConfiguration) -> URLSession) async -> Outcome {
        let configuration = URLSessionConfiguration.ephemeral
        if let timeout = test.configureRequestTimeout { configuration.timeoutIntervalForRequest = timeout }
        if let timeout = test.configureResourceTimeout { configuration.timeoutIntervalForResource = timeout }
        let session = makeSession(configuration)
        defer { session.invalidateAndCancel() }
        guard let url = URL(string: base + test.path), let next = URL(string: base + "/small.txt") else {
            return Outcome(result: "bad URL", seconds: 0, next: "", nextSeconds: 0)
        }
        var request = URLRequest(url: url)
        if let timeout = test.requestTimeout { request.timeoutInterval = timeout }
        for (name, value) in test.headers { request.setValue(value, forHTTPHeaderField: name) }

        let clock = ContinuousClock()
        let start = clock.now
        let task = Task { try await session.data(for: request) }
        if let cancelAfter = test.cancelAfter {
            Task {
                try await Task.sleep(for: cancelAfter)
                task.cancel()
            }
        }
        let watchdog = Task {
            try await Task.sleep(for: test.watchdog)
            task.cancel()
        }
        var outcome = Outcome(result: "", seconds: 0, next: "", nextSeconds: 0)
        do {
            let (data, response) = try await task.value
            outcome.result = "\((response as? HTTPURLResponse)?.statusCode ?? 0)"
            outcome.bodyLength = data.count
        } catch {
            outcome.result = (error as? URLError).map { "URLError \($0.code.rawValue)" } ?? "\(type(of: error))"
        }
        watchdog.cancel()
        outcome.seconds = seconds(start.duration(to: clock.now))
        if outcome.seconds >= seconds(test.watchdog) - 0.05 && test.cancelAfter == nil {
            outcome.result = "no answer within \(Int(seconds(test.watchdog))) s"
        }

        let nextStart = clock.now
        do {
            let (_, response) = try await session.data(from: next)
            outcome.next = "\((response as? HTTPURLResponse)?.statusCode ?? 0)"
        } catch {
            outcome.next = (error as? URLError).map { "URLError \($0.code.rawValue)" } ?? "\(error)"
        }
        outcome.nextSeconds = seconds(nextStart.duration(to: clock.now))
        return outcome
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    @Test func theAccessoryLinkBehavesAsTheBuiltInStackExceptWhereListed() async throws {
        let directory = try TemporaryDirectory("diff")
        defer { directory.remove() }
        // The stalled upstream: a unix socket that is listened on and never accepted from.
        let stallPath = directory.path("stall.sock")
        let stall = try listeningUnixSocket(stallPath)
        defer { close(stall) }
        let port = try freeLoopbackPort()

        try await NginxFixture.with(tcpPort: port, stallUpstream: stallPath) { nginx in
            let name = "nginx-diff"
            AccessoryRouteTable.shared.add(
                AccessoryRoute(name: name, transport: UnixSocketTransport(path: nginx.socketPath))
            )
            defer { Task { await AccessoryRouteTable.shared.remove(name) } }

            // One call through each stack first, not compared: the first case would otherwise
            // also time each stack's one-time start (FoundationNetworking's, and the accessory
            // side's event loop and route table), which took 0.7 s against 53 ms once while other
            // suites of this target loaded the machine.
            let warmUp = Case(name: "warm-up", path: "/small.txt")
            _ = await Self.run(warmUp, base: "http://127.0.0.1:\(port)") { URLSession(configuration: $0) }
            _ = await Self.run(warmUp, base: "accessory://\(name)") { configuration in
                configuration.registerAccessoryProtocol()
                return URLSession(configuration: configuration)
            }
            var differences: [String] = []
            var report: [String] = []
            var nextTimes: [Double] = []
            for test in Self.cases {
                let builtIn = await Self.run(test, base: "http://127.0.0.1:\(port)") {
                    URLSession(configuration: $0)
                }
                let accessory = await Self.run(test, base: "accessory://\(name)") { configuration in
                    configuration.registerAccessoryProtocol()
                    return URLSession(configuration: configuration)
                }
                report.append("\(test.name):\n  built-in:  \(builtIn)\n  accessory: \(accessory)")
                #expect(accessory.next == "200", "\(test.name): the next request through the link failed: \(accessory)")
                nextTimes.append(accessory.nextSeconds)
                let differs = !builtIn.matches(accessory)
                if differs && Self.allowList[test.name] == nil { differences.append(test.name) }
                if !differs && Self.allowList[test.name] != nil {
                    Issue.record(
                        "\(test.name) no longer differs: remove it from the allow-list (and from URLSessionOnLinux.md in AccessoryURLProtocol.docc)"
                    )
                }
            }
            let table = report.joined(separator: "\n")
            // Within 50 ms as the median, every one under 500 ms (a loaded machine's scheduling);
            // tenfold under a sanitizer (a median of 0.27 s seen under AddressSanitizer in CI).
            nextTimes.sort()
            let factor = Double(TimeBounds.factor)
            #expect(nextTimes[nextTimes.count / 2] < 0.05 * factor, "the next request through the link: \(nextTimes) s")
            #expect(nextTimes[nextTimes.count - 1] < 0.5 * factor, "the next request through the link: \(nextTimes) s")
            print("URLSession, built-in stack over TCP vs AccessoryURLProtocol over nginx's unix socket:\n\(table)")
            #expect(differences.isEmpty, "differences not in the allow-list: \(differences)\n\(table)")
        }
    }
}

/// A unix stream socket bound at `path` and listened on (never accepted from).
func listeningUnixSocket(_ path: String) throws -> CInt {
    let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard descriptor >= 0 else { throw TestFailure("socket(AF_UNIX) failed") }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
        close(descriptor)
        throw TestFailure("socket path too long: \(path)")
    }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (index, byte) in bytes.enumerated() { raw[index] = byte }
    }
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 && listen(descriptor, 64) == 0
        }
    }
    guard bound else {
        close(descriptor)
        throw TestFailure("could not listen on \(path)")
    }
    return descriptor
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
func freeLoopbackPort() throws -> UInt16 {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw TestFailure("socket(AF_INET) failed") }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0
        }
    }
    guard ok else { throw TestFailure("could not find a free port") }
    return UInt16(bigEndian: address.sin_port)
}
