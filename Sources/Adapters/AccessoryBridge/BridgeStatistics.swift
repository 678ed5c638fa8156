import AccessoryTransport
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// What the bridge has done for one accessory, for `GET /.well-known/accessory-http/status` and
/// `accessory-http status`.
public struct BridgeStatus: Sendable, Hashable {
    /// The accessory's name (the config section, or "accessory").
    public var name: String
    /// The device spec the link was opened from.
    public var device: String
    /// The links the bridge carries exchanges on (one per USB interface it may use; else 1).
    public var links = 1
    /// Times the link's byte stream was opened.
    public var linkOpens: Int
    /// Times sessions were restarted on the link's byte stream without reopening it.
    public var linkRenewals: Int
    /// Times the device was released after the link stood idle (`--idle-release`).
    public var idleReleases = 0
    /// Requests that ended, whether answered (with any status) or not.
    public var requests: Int
    /// Exchanges on the link now.
    public var active: Int
    /// Requests waiting for their turn on the link now.
    public var queued: Int
    /// Body bytes carried from clients to the accessory.
    public var bytesToAccessory: Int64
    /// Body bytes carried from the accessory to clients.
    public var bytesFromAccessory: Int64
    /// Answers by status code (the accessory's and the bridge's own).
    public var responses: [Int: Int] = [:]
    /// Errors by kind: `accessory-unreachable` (502), `queue-timeout` (503), `shutting-down`
    /// (503), `accessory-timeout` (504), `bad-request` (400, 405), `client-gone` (a client left
    /// mid-exchange).
    public var errors: [String: Int]
    /// The last error's message, if any.
    public var lastError: String?
    /// When ``lastError`` happened, in seconds since 1970 (to the millisecond); `nil` if none has.
    public var lastErrorAt: Double?

    /// The status as one JSON object.
    public var json: String {
        let errors = self.errors.sorted { $0.key < $1.key }.map { "\(Self.quote($0.key)):\($0.value)" }
        var fields = [
            "\"name\":\(Self.quote(self.name))",
            "\"device\":\(Self.quote(self.device))",
            "\"link\":{\"count\":\(self.links),\"opens\":\(self.linkOpens),\"renewals\":\(self.linkRenewals),\"idleReleases\":\(self.idleReleases)}",
            "\"requests\":\(self.requests)",
            "\"active\":\(self.active)",
            "\"queued\":\(self.queued)",
            "\"bytesToAccessory\":\(self.bytesToAccessory)",
            "\"bytesFromAccessory\":\(self.bytesFromAccessory)",
            "\"responses\":{\(self.responses.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ","))}",
            "\"errors\":{\(errors.joined(separator: ","))}",
        ]
        if let lastError { fields.append("\"lastError\":\(Self.quote(lastError))") }
        if let lastErrorAt { fields.append("\"lastErrorAt\":\(lastErrorAt)") }
        return "{" + fields.joined(separator: ",") + "}"
    }

    static func quote(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20:
                result += "\\u00" + String(scalar.value, radix: 16).leftPadded(to: 2)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        self.count >= width ? self : String(repeating: "0", count: width - self.count) + self
    }
}

/// The bridge's running counts, updated by every exchange.
final class BridgeStatistics: Sendable {
    private struct Counts {
        var requests = 0
        var responses: [Int: Int] = [:]
        var bytesToAccessory: Int64 = 0
        var bytesFromAccessory: Int64 = 0
        var errors: [String: Int] = [:]
        var lastError: String?
        var lastErrorAt: Double?
        var idleReleases = 0
    }

    private let counts = TrackedMutex(Counts())

    /// A request ended, answered with `status` (0: no answer began).
    func answered(_ status: Int) {
        self.counts.withLock {
            $0.requests += 1
            if status > 0 { $0.responses[status, default: 0] += 1 }
        }
    }

    func carried(toAccessory: Int, fromAccessory: Int) {
        self.counts.withLock {
            $0.bytesToAccessory += Int64(toAccessory)
            $0.bytesFromAccessory += Int64(fromAccessory)
        }
    }

    func releasedIdle() {
        self.counts.withLock { $0.idleReleases += 1 }
    }

    func failed(_ kind: String, _ message: String) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let seconds = Double(now.tv_sec) + Double(now.tv_nsec / 1_000_000) / 1000
        self.counts.withLock {
            $0.errors[kind, default: 0] += 1
            $0.lastError = message
            $0.lastErrorAt = seconds
        }
    }

    func snapshot(into status: inout BridgeStatus) {
        self.counts.withLock {
            status.requests = $0.requests
            status.responses = $0.responses
            status.bytesToAccessory = $0.bytesToAccessory
            status.bytesFromAccessory = $0.bytesFromAccessory
            status.errors = $0.errors
            status.lastError = $0.lastError
            status.lastErrorAt = $0.lastErrorAt
            status.idleReleases = $0.idleReleases
        }
    }
}
