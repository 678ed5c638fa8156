import AccessoryTransport
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A request as the scripted device read it off its end of the socketpair.
struct DeviceRequest: Sendable {
    var head = ""
    var method = ""
    var path = ""
    var headers: [(name: String, value: String)] = []
    var body: [UInt8] = []
    var chunked = false

    func header(_ name: String) -> String? {
        self.headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// One thing the device does on a connection, in order.
enum DeviceStep: Sendable {
    /// Reads one request head (up to CRLFCRLF) and its body (Content-Length or chunked).
    case readRequest
    /// Reads only the head (for `Expect: 100-continue`).
    case readHead
    /// Reads the body of the last head read.
    case readBody
    case write([UInt8])
    /// Writes bytes computed from the last request read.
    case respond(@Sendable (DeviceRequest) -> [UInt8])
    /// Writes `count` bytes of `byte`, in 64 KiB writes (each counted as it completes).
    case writeRepeated(UInt8, count: Int)
    case sleep(milliseconds: Int)
    /// Waits until the test signals `cue` (bounded by the I/O timeout): for a pause that must last
    /// until something happened on the host, whatever the machine's load, where a sleep would race.
    case wait(DeviceCue)
    /// Records a problem if request bytes are waiting unread (requests must come one at a time).
    case expectQuiet
    /// Closes the device end now.
    case close

    static func write(_ text: String) -> DeviceStep { .write(Array(text.utf8)) }
}

extension [DeviceStep] {
    /// One connection's script: a response of `count` bytes of `byte`, then a small reply
    /// `after <path>` to the next request (proof the link stayed in step).
    static func largeBodyThenNext(_ byte: UInt8, count: Int) -> [DeviceStep] {
        [
            .readRequest, .write(Reply.head(contentLength: count)), .writeRepeated(byte, count: count),
            .readRequest, .respond { Reply.ok("after " + $0.path) },
        ]
    }
}

/// A signal from the test to a device thread blocked in ``DeviceStep/wait(_:)``; each `signal()`
/// releases one wait.
final class DeviceCue: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)

    func signal() { self.semaphore.signal() }

    func wait(seconds: Int) -> Bool {
        self.semaphore.wait(timeout: .now() + .seconds(seconds)) == .success
    }
}

/// A `SocketPairTransport` whose device end runs a script on its own thread with blocking I/O.
/// Each `open` is a new connection and runs `script(connectionIndex)`. After the script, the
/// device reads until the host closes (recording any bytes as unexpected), then closes.
final class ScriptedDevice: Sendable {
    struct Connection: Sendable {
        var requests: [DeviceRequest] = []
        /// Bytes the host sent that no step read.
        var unexpected: [UInt8] = []
        /// Response bytes written so far.
        var written = 0
        var problems: [String] = []
        var finished = false
    }

    private let script: @Sendable (Int) -> [DeviceStep]
    private let state = TrackedMutex<[Connection]>([])
    /// Bounds every blocking read and write, so a bug fails a test instead of hanging it.
    let ioTimeoutSeconds: Int

    init(ioTimeoutSeconds: Int = 5, script: @escaping @Sendable (Int) -> [DeviceStep]) {
        self.script = script
        self.ioTimeoutSeconds = ioTimeoutSeconds
    }

    /// One script per connection; connections past the list get an empty script.
    convenience init(_ connections: [[DeviceStep]]) {
        self.init { index in index < connections.count ? connections[index] : [] }
    }

    var transport: SocketPairTransport {
        // One scripted wire: an abandoned response on it is drained, as on a serial line.
        SocketPairTransport(name: "scripted-device", opensIndependentStreams: false) { descriptor in
            self.accept(descriptor)
        }
    }

    var connectionCount: Int { self.state.withLock { $0.count } }
    var connections: [Connection] { self.state.withLock { $0 } }
    var allRequests: [DeviceRequest] { self.connections.flatMap(\.requests) }
    var problems: [String] { self.connections.flatMap(\.problems) }

    /// Waits (bounded) until every connection's thread has finished.
    func waitUntilFinished(timeout: Duration = .seconds(10)) async -> Bool {
        await eventually(timeout: timeout) { self.connections.allSatisfy(\.finished) }
    }

    private func accept(_ descriptor: CInt) {
        let index = self.state.withLock { connections in
            connections.append(Connection())
            return connections.count - 1
        }
        let steps = self.script(index)
        let thread = Thread {
            var io = DeviceIO(descriptor: descriptor, timeoutSeconds: self.ioTimeoutSeconds) { update in
                self.state.withLock { update(&$0[index]) }
            }
            io.run(steps)
        }
        thread.start()
    }
}

/// The device thread's blocking I/O on its end of the socketpair.
private struct DeviceIO {
    let descriptor: CInt
    let timeoutSeconds: Int
    let record: (@Sendable (inout ScriptedDevice.Connection) -> Void) -> Void
    var buffer: [UInt8] = []
    var last = DeviceRequest()
    var closed = false

    init(
        descriptor: CInt,
        timeoutSeconds: Int,
        record: @escaping (@Sendable (inout ScriptedDevice.Connection) -> Void) -> Void
    ) {
        self.descriptor = descriptor
        self.timeoutSeconds = timeoutSeconds
        self.record = record
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    mutating func run(_ steps: [DeviceStep]) {
        defer {
            if !self.closed { _ = close(self.descriptor) }
            self.record { $0.finished = true }
        }
        do {
            for step in steps {
                try self.perform(step)
                if self.closed { return }
            }
            // Read until the host closes; whatever arrives was not expected by the script.
            if !self.buffer.isEmpty {
                let leftover = self.buffer
                self.record { $0.unexpected += leftover }
                self.buffer.removeAll()
            }
            while try self.fill() {
                let more = self.buffer
                self.record { $0.unexpected += more }
                self.buffer.removeAll()
            }
        } catch {
            let message = "\(error)"
            self.record { $0.problems.append(message) }
        }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    mutating func perform(_ step: DeviceStep) throws {
        switch step {
        case .readRequest:
            try self.readHead()
            try self.readBody()
        case .readHead:
            try self.readHead()
        case .readBody:
            try self.readBody()
        case .write(let bytes):
            try self.write(bytes)
        case .respond(let make):
            try self.write(make(self.last))
        case .writeRepeated(let byte, let count):
            var left = count
            let chunk = [UInt8](repeating: byte, count: 64 * 1024)
            while left > 0 {
                let n = min(left, chunk.count)
                try self.write(Array(chunk[0..<n]))
                left -= n
            }
        case .sleep(let milliseconds):
            usleep(useconds_t(milliseconds * 1000))
        case .expectQuiet:
            var poller = pollfd(fd: self.descriptor, events: Int16(POLLIN), revents: 0)
            if !self.buffer.isEmpty || poll(&poller, 1, 0) > 0 {
                let pending = self.buffer.count
                self.record {
                    $0.problems.append("request bytes were pending while a response was due (\(pending) buffered)")
                }
            }
        case .close:
            _ = close(self.descriptor)
            self.closed = true
        case .wait(let cue):
            if !cue.wait(seconds: self.timeoutSeconds) {
                throw Failure(description: "the device's cue never came")
            }
        }
    }

    /// Reads more bytes; false at EOF.
    mutating func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        let n = chunk.withUnsafeMutableBytes { recv(self.descriptor, $0.baseAddress, $0.count, 0) }
        if n < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK { throw Failure(description: "device read timed out") }
            if errno == ECONNRESET { return false }
            throw Failure(description: "device read failed: errno \(errno)")
        }
        if n == 0 { return false }
        self.buffer += chunk[0..<n]
        return true
    }

    mutating func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes {
                send(self.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure(description: "device write failed: errno \(errno)")
            }
            offset += n
            self.record { $0.written += n }
        }
    }

    mutating func readLine() throws -> String {
        while true {
            if let lf = self.buffer.firstIndex(of: 0x0A) {
                var line = Array(self.buffer[..<lf])
                self.buffer.removeFirst(lf + 1)
                if line.last == 0x0D { line.removeLast() }
                return String(decoding: line, as: UTF8.self)
            }
            guard try self.fill() else { throw Failure(description: "EOF inside a line") }
        }
    }

    mutating func readExactly(_ count: Int) throws -> [UInt8] {
        while self.buffer.count < count {
            guard try self.fill() else { throw Failure(description: "EOF inside a body") }
        }
        let bytes = Array(self.buffer[..<count])
        self.buffer.removeFirst(count)
        return bytes
    }

    mutating func readHead() throws {
        var request = DeviceRequest()
        let start = try self.readLine()
        request.head = start
        let parts = start.split(separator: " ")
        guard parts.count == 3 else { throw Failure(description: "bad request line \(start.debugDescription)") }
        request.method = String(parts[0])
        request.path = String(parts[1])
        while true {
            let line = try self.readLine()
            if line.isEmpty { break }
            request.head += "\n" + line
            guard let colon = line.firstIndex(of: ":") else {
                throw Failure(description: "bad header line \(line.debugDescription)")
            }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            request.headers.append((String(line[..<colon]), value))
        }
        self.last = request
        let read = request
        self.record { $0.requests.append(read) }
    }

    mutating func readBody() throws {
        var body: [UInt8] = []
        let chunked = self.last.header("transfer-encoding")?.lowercased().contains("chunked") ?? false
        if chunked {
            while true {
                let sizeLine = try self.readLine()
                let hex = sizeLine.split(separator: ";").first.map(String.init) ?? ""
                guard let size = Int(hex.trimmingCharacters(in: .whitespaces), radix: 16) else {
                    throw Failure(description: "bad chunk size \(sizeLine.debugDescription)")
                }
                if size == 0 {
                    while try !self.readLine().isEmpty {}
                    break
                }
                body += try self.readExactly(size)
                guard try self.readLine().isEmpty else { throw Failure(description: "chunk not followed by CRLF") }
            }
        } else if let length = self.last.header("content-length").flatMap({ Int($0) }) {
            body = try self.readExactly(length)
        }
        self.last.body = body
        self.last.chunked = chunked
        let request = self.last
        self.record { connection in
            if !connection.requests.isEmpty { connection.requests[connection.requests.count - 1] = request }
        }
    }
}

/// Polls `condition` every 10 ms until it holds or `timeout` passes.
func eventually(timeout: Duration = .seconds(5), _ condition: @Sendable () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}

// MARK: Response builders

enum Reply {
    static func ok(_ body: String, status: String = "200 OK", headers: [String] = []) -> [UInt8] {
        let head = (["HTTP/1.1 \(status)", "Content-Length: \(body.utf8.count)"] + headers).joined(separator: "\r\n")
        return Array((head + "\r\n\r\n" + body).utf8)
    }

    static func chunked(_ parts: [String], headers: [String] = []) -> [UInt8] {
        var text = (["HTTP/1.1 200 OK", "Transfer-Encoding: chunked"] + headers).joined(separator: "\r\n") + "\r\n\r\n"
        for part in parts { text += String(part.utf8.count, radix: 16) + "\r\n" + part + "\r\n" }
        text += "0\r\n\r\n"
        return Array(text.utf8)
    }

    static func head(contentLength: Int, status: String = "200 OK") -> [UInt8] {
        Array("HTTP/1.1 \(status)\r\nContent-Length: \(contentLength)\r\n\r\n".utf8)
    }
}
