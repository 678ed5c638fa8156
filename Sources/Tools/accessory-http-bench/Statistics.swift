/// min / median / max of one measurement's repetitions, and the table they are printed in.
struct Summary {
    let values: [Double]
    var sorted: [Double] { values.sorted() }
    var min: Double { sorted.first ?? .nan }
    var max: Double { sorted.last ?? .nan }
    var median: Double {
        let s = sorted
        guard !s.isEmpty else { return .nan }
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }

    static func percentile(_ values: [Double], _ p: Double) -> Double {
        let s = values.sorted()
        guard !s.isEmpty else { return .nan }
        let index = Swift.min(s.count - 1, Swift.max(0, Int((p * Double(s.count)).rounded(.up)) - 1))
        return s[index]
    }
}

struct Row {
    let name: String
    let unit: String
    /// nil: not measured; `note` says why.
    let summary: Summary?
    var note: String = ""
}

struct Table {
    private(set) var rows: [Row] = []
    private var medians: [String: Double] = [:]

    mutating func add(_ name: String, _ unit: String, _ values: [Double], note: String = "") {
        self.rows.append(Row(name: name, unit: unit, summary: Summary(values: values), note: note))
        self.medians[name] = Summary(values: values).median
    }

    mutating func unavailable(_ name: String, _ unit: String, _ why: String) {
        self.rows.append(Row(name: name, unit: unit, summary: nil, note: why))
    }

    func median(_ name: String) -> Double? { self.medians[name] }

    static func format(_ value: Double) -> String {
        guard value.isFinite else { return "—" }
        if value >= 1000 { return String(Int(value.rounded())) }
        if value >= 100 { return String(Int(value.rounded())) }
        let scaled = (value * 10).rounded() / 10
        return String(scaled)
    }

    func render() -> String {
        let header = ["measurement", "unit", "min", "median", "max", "note"]
        var lines = [header]
        for row in rows {
            if let summary = row.summary {
                lines.append([
                    row.name, row.unit, Self.format(summary.min), Self.format(summary.median), Self.format(summary.max),
                    row.note,
                ])
            } else {
                lines.append([row.name, row.unit, "—", "—", "—", row.note])
            }
        }
        var text = ""
        text += "| " + header.joined(separator: " | ") + " |\n"
        text += "|" + header.map { _ in "---" }.joined(separator: "|") + "|\n"
        for line in lines.dropFirst() { text += "| " + line.joined(separator: " | ") + " |\n" }
        return text
    }
}
