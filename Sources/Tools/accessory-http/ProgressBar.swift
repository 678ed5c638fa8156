import AccessoryClient
import AccessoryTransport
import Synchronization

/// A one-line progress bar on stderr, redrawn at most ten times a second.
final class ProgressBar: Sendable {
    private struct State {
        var lastDraw: ContinuousClock.Instant?
        var latest = TransferProgress(bytesTransferred: 0, totalBytes: nil)
    }

    private let started = ContinuousClock.now
    private let state = TrackedMutex(State())

    func update(_ progress: TransferProgress) {
        let now = ContinuousClock.now
        let draw: Bool = self.state.withLock { state in
            state.latest = progress
            if let last = state.lastDraw, now - last < .milliseconds(100) { return false }
            state.lastDraw = now
            return true
        }
        if draw { self.draw(progress, final: false) }
    }

    func finish() {
        self.draw(self.state.withLock { $0.latest }, final: true)
    }

    private func draw(_ progress: TransferProgress, final: Bool) {
        let elapsed = ContinuousClock.now - self.started
        let seconds = max(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, 0.001)
        let rate = Double(progress.bytesTransferred) / seconds
        var line = "\r"
        if let fraction = progress.fractionCompleted {
            let width = 30
            let filled = min(width, Int(fraction * Double(width)))
            line += "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled) + "] "
            line += "\(Int(fraction * 100))%".padding(4) + " "
            line += Self.bytes(Double(progress.bytesTransferred)) + " / " + Self.bytes(Double(progress.totalBytes ?? 0))
        } else {
            line += Self.bytes(Double(progress.bytesTransferred))
        }
        line += "  " + Self.bytes(rate) + "/s   "
        StandardError.write(line + (final ? "\n" : ""))
    }

    static func bytes(_ count: Double) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = count
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(Int(value)) B" : "\((value * 10).rounded() / 10) \(units[unit])"
    }
}

extension String {
    fileprivate func padding(_ width: Int) -> String {
        self.count >= width ? self : String(repeating: " ", count: width - self.count) + self
    }
}
