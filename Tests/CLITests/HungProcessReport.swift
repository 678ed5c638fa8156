import Foundation

/// What a child that ran past its limit was doing, read from `/proc` before it is killed: each
/// thread's name, state, kernel wait channel and system call, for the child and every process
/// under it (a sanitizer's leak checker runs as one, tracing the threads it stopped).
///
/// A CLI run under AddressSanitizer once printed its error and then never exited (2026-12-07,
/// CI only, not reproduced in 320 local tries); the next one leaves this behind to say where.
enum HungProcessReport {
    /// One line per thread, indented under a line per process; empty if `pid` is gone.
    static func describe(_ pid: Int32) -> String {
        var lines: [String] = []
        for process in [pid] + self.descendants(of: pid) {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process)/task")) ?? []
            guard !tasks.isEmpty else { continue }
            // comm, not cmdline: reading cmdline takes the hung process's memory-map lock.
            lines.append("process \(process) (\(self.field("/proc/\(process)/comm"))):")
            for task in tasks.sorted(by: { (Int($0) ?? 0) < (Int($1) ?? 0) }) {
                let base = "/proc/\(process)/task/\(task)"
                let state = self.state(of: base)
                let wchan = self.field("\(base)/wchan")
                let syscall = self.field("\(base)/syscall").split(separator: " ").first.map(String.init) ?? "?"
                lines.append("  \(task) \(self.field("\(base)/comm")) state \(state) wchan \(wchan) syscall \(syscall)")
            }
        }
        return lines.joined(separator: "\n")
    }

    /// Every process whose parent chain leads to `pid`.
    private static func descendants(of pid: Int32) -> [Int32] {
        var parents: [Int32: Int32] = [:]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let child = Int32(entry), let parent = self.parent(of: child) else { continue }
            parents[child] = parent
        }
        var found: [Int32] = []
        var seen: Set<Int32> = [pid]
        var frontier: Set<Int32> = [pid]
        while !frontier.isEmpty {
            let next = parents.filter { frontier.contains($0.value) && !seen.contains($0.key) }.map(\.key)
            found += next
            seen.formUnion(next)
            frontier = Set(next)
        }
        return found
    }

    /// The fourth field of `/proc/PID/stat`, after the name in parentheses (which may hold spaces).
    private static func parent(of pid: Int32) -> Int32? {
        let stat = self.field("/proc/\(pid)/stat")
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 1 ? Int32(fields[1]) : nil
    }

    private static func state(of taskPath: String) -> String {
        let stat = self.field("\(taskPath)/stat")
        guard let close = stat.lastIndex(of: ")") else { return "?" }
        return stat[stat.index(after: close)...].split(separator: " ").first.map(String.init) ?? "?"
    }

    private static func field(_ path: String) -> String {
        guard let data = FileManager.default.contents(atPath: path) else { return "?" }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
