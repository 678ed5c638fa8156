import Glibc

/// The table and, under it, each target of issue 6 with the ratio measured in this run.
enum Report {
    static func render(_ table: Table, bench: Benchmarks) -> String {
        var text =
            "accessory-http benchmark: \(bench.reps) repetitions each, all in one run on one machine (\(Self.machine()))\n\n"
        text += table.render()
        text += "\nTargets (ratios of medians from this run):\n"
        func ratio(_ a: String, _ b: String) -> Double? {
            guard let x = table.median(a), let y = table.median(b), y > 0 else { return nil }
            return x / y
        }
        func line(_ label: String, _ value: Double?, _ goal: String?, _ met: (Double) -> Bool, percent: Bool = true) {
            guard let value else {
                text += "- \(label): not measured\n"
                return
            }
            let shown = percent ? "\(Table.format(value * 100)) %" : "\(Table.format(value))×"
            guard let goal else {
                text += "- \(label): \(shown) (for information)\n"
                return
            }
            text += "- \(label): \(shown) (target \(goal)) \(met(value) ? "MET" : "NOT MET")\n"
        }
        let callers = [("caller on the pool", ""), ("caller on the link's executor", CallerOnLink.suffix)]
        for (label, suffix) in callers {
            line(
                "native bulk / raw socketpair (\(label))",
                ratio(Names.nativeBulk + suffix, Names.rawBulk),
                "≥ 60 %",
                { $0 >= 0.6 }
            )
            line(
                "native bulk / curl + nginx (\(label))",
                ratio(Names.nativeBulk + suffix, Names.curlBulk),
                "≥ 100 %",
                { $0 >= 1 }
            )
        }
        line("CLI bulk / raw socketpair", ratio(Names.cliBulk, Names.rawBulk), nil, { _ in true })
        line(
            "CLI upload from a FIFO / from a file",
            ratio(Names.cliUploadFIFO, Names.cliUploadFile),
            nil,
            { _ in true }
        )
        for (label, suffix) in callers {
            line(
                "native /status req/s / h2load + nginx (\(label))",
                ratio(Names.nativeStatus + suffix, Names.h2loadStatus),
                "≥ 100 %",
                { $0 >= 1 }
            )
        }
        line(
            "bare NIO client + bare NIO handler req/s / h2load + nginx (the floor of any NIO design)",
            ratio(Names.nioPairFloor, Names.h2loadStatus),
            nil,
            { _ in true }
        )
        line(
            "native /status req/s (on the link's executor) / bare NIO pair",
            ratio(Names.nativeStatus + CallerOnLink.suffix, Names.nioPairFloor),
            "≥ 56 %, the ratio before HTTP/2 and sessions",
            { $0 >= 0.56 }
        )
        line(
            "native /status req/s / raw ping-pong",
            ratio(Names.nativeStatus + CallerOnLink.suffix, Names.rawStatus),
            nil,
            { _ in true }
        )
        line(
            "native bulk / URLSession bulk",
            ratio(Names.nativeBulk, Names.urlSessionBulk),
            "≤ 2×",
            { $0 <= 2 },
            percent: false
        )
        for (label, suffix) in callers {
            line(
                "pty native / raw pty (\(label))",
                ratio(Names.ptyNative + suffix, Names.ptyRaw),
                "≥ 90 %",
                { $0 >= 0.9 }
            )
        }
        line(
            "session=on bulk / plain bulk (same socketpair, runs alternated)",
            ratio(Names.sessionBulk, Names.plainBulkPaired),
            "≥ 90 %",
            { $0 >= 0.9 }
        )
        line(
            "session=on /status req/s / plain (runs alternated)",
            ratio(Names.sessionStatus, Names.plainStatusPaired),
            nil,
            { _ in true }
        )
        line(
            "cancel → next answer, plain / session=on (how much longer plain waits)",
            ratio(Names.plainCancelToNext, Names.sessionCancelToNext),
            nil,
            { _ in true },
            percent: false
        )
        for (label, suffix) in callers {
            line(
                "HTTP/2 bulk / HTTP/1.1 bulk (same socketpair, runs alternated; \(label))",
                ratio(Names.http2Bulk + suffix, Names.plainBulkForHTTP2 + suffix),
                "≥ 90 %",
                { $0 >= 0.9 }
            )
        }
        line(
            "bare NIO HTTP/2 pair bulk / HTTP/1.1 bulk (the ceiling of HTTP/2 on NIO)",
            ratio(Names.nioH2PairBulk, Names.plainBulkForHTTP2),
            nil,
            { _ in true }
        )
        line(
            "HTTP/2 bulk / bare NIO HTTP/2 pair bulk",
            ratio(Names.http2Bulk, Names.nioH2PairBulk),
            nil,
            { _ in true }
        )
        line(
            "HTTP/2 /status req/s, 8 callers / 1 caller",
            ratio(Names.http2Status8, Names.http2Status),
            nil,
            { _ in true },
            percent: false
        )
        line(
            "HTTP/2 /status req/s (1 caller) / HTTP/1.1",
            ratio(Names.http2Status, Names.http1StatusForHTTP2),
            nil,
            { _ in true }
        )
        line(
            "HTTP/2 /status req/s (1 caller on the pool) / bare NIO HTTP/2 pair",
            ratio(Names.http2Status, Names.nioH2PairFloor),
            nil,
            { _ in true }
        )
        line(
            "HTTP/2 /status req/s (1 caller on the link's executor) / bare NIO HTTP/2 pair",
            ratio(Names.http2Status + CallerOnLink.suffix, Names.nioH2PairFloor),
            "≥ 70 %",
            { $0 >= 0.7 }
        )
        for (label, suffix) in callers {
            line(
                "HTTP/2 /status p99 during a bulk GET / idle (\(label))",
                ratio(Names.http2BusyP99 + suffix, Names.http2IdleP99 + suffix),
                "≤ 2×",
                { $0 <= 2 },
                percent: false
            )
        }
        line(
            "  our HTTP/2 client → bare NIO HTTP/2 server (caller on the pool): p99 during a bulk GET / idle",
            ratio(Names.http2ToBareBusyP99, Names.http2ToBareIdleP99),
            nil,
            { _ in true },
            percent: false
        )
        line(
            "  bare NIO HTTP/2 client → our responder: p99 during a bulk GET / idle",
            ratio(Names.nioH2ToResponderBusyP99, Names.nioH2ToResponderIdleP99),
            nil,
            { _ in true },
            percent: false
        )
        line(
            "bare NIO HTTP/2 pair: /status p99 during a bulk GET / idle (the same ratio for the floor of any NIO design)",
            ratio(Names.nioH2PairBusyP99, Names.nioH2PairIdleP99),
            nil,
            { _ in true },
            percent: false
        )
        line(
            "HTTP/2 /status request bytes / HTTP/1.1 (HPACK)",
            ratio(Names.http2RequestBytes, Names.http1RequestBytes),
            nil,
            { _ in true }
        )
        line(
            "curl through the bridge / curl + nginx (bulk)",
            ratio(Names.bridgeCurlBulk, Names.curlBulk),
            nil,
            { _ in true }
        )
        line(
            "h2load --h1 -c 1 through the bridge / native /status on the link's executor",
            ratio(Names.bridgeStatus1, Names.nativeStatus + CallerOnLink.suffix),
            nil,
            { _ in true }
        )
        line(
            "h2load --h1 -c 8 through the bridge / -c 1 (one exchange at a time on an HTTP/1.1 link)",
            ratio(Names.bridgeStatus8, Names.bridgeStatus1),
            nil,
            { _ in true },
            percent: false
        )
        if let perConnection = table.median(Names.bridgeIdleMemory) {
            text += "- bridge RSS per idle client connection: \(Table.format(perConnection)) KiB (for information)\n"
        }
        if let growth = table.median(Names.memoryGrowth) {
            text +=
                "- CLI peak RSS growth for the download: \(Table.format(growth)) MiB (target < 64 MiB) \(growth < 64 ? "MET" : "NOT MET")\n"
        } else {
            text += "- CLI peak RSS growth: not measured\n"
        }
        if let growth = table.median(Names.urlSessionMemory) {
            text +=
                "- URLSession peak RSS growth for the download: \(Table.format(growth)) MiB (target < 64 MiB) \(growth < 64 ? "MET" : "NOT MET")\n"
        } else {
            text += "- URLSession peak RSS growth: not measured\n"
        }
        return text
    }

    static func machine() -> String {
        var name = utsname()
        uname(&name)
        let release = withUnsafeBytes(of: &name.release) {
            String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        let load = Sys.readFile("/proc/loadavg").split(separator: " ").prefix(3).joined(separator: " ")
        return "Linux \(release), \(sysconf(Int32(_SC_NPROCESSORS_ONLN))) CPUs, load \(load) at the end"
    }
}
