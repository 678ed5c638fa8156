import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// The long-running commands' log (`serve-gadget`, `bridge`): one line per event on standard
/// error, stamped to the millisecond in UTC, then level, label, metadata and message —
/// `2026-11-26T20:01:14.123Z info accessory-http.functionfs: generation=69 enabled by the host`.
///
/// Milliseconds, where swift-log's `StreamLogHandler` stamps whole seconds: the USB fault matrix
/// (and a user reading a field log) needs to tell how long after a host's open the gadget
/// answered, which is well under a second.
struct ServiceLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]

    init(label: String, level: Logger.Level) {
        self.label = label
        self.logLevel = level
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = self.metadata.merging(event.metadata ?? [:]) { $1 }
        let fields = merged.sorted { $0.key < $1.key }.map { " \($0.key)=\($0.value)" }.joined()
        StandardError.write("\(Self.timestamp()) \(event.level) \(self.label):\(fields) \(event.message)\n")
    }

    /// Now, in UTC, as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var parts = tm()
        var seconds = now.tv_sec
        gmtime_r(&seconds, &parts)
        func padded(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(padded(parts.tm_year + 1900, 4))-\(padded(parts.tm_mon + 1, 2))-\(padded(parts.tm_mday, 2))"
            + "T\(padded(parts.tm_hour, 2)):\(padded(parts.tm_min, 2)):\(padded(parts.tm_sec, 2))"
            + ".\(padded(Int32(now.tv_nsec / 1_000_000), 3))Z"
    }
}
