import Foundation

/// Runs the system `curl` with a bounded run time and collects its output.
struct Curl {
    static let path = "/usr/bin/curl"
    static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: Self.path) }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs curl with `arguments` (plus `--max-time`); kills it if it outlives `limit`.
    static func run(_ arguments: [String], limit: Duration = .seconds(30)) async throws -> Result {
        let directory = FileManager.default.temporaryDirectory
        let outURL = directory.appendingPathComponent("curl-out-\(UUID().uuidString)")
        let errURL = directory.appendingPathComponent("curl-err-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        defer {
            try? FileManager.default.removeItem(at: outURL)
            try? FileManager.default.removeItem(at: errURL)
        }
        let out = try FileHandle(forWritingTo: outURL)
        let err = try FileHandle(forWritingTo: errURL)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.path)
        process.arguments = ["--max-time", "\(limit.components.seconds)"] + arguments
        process.standardOutput = out
        process.standardError = err
        let exited = AsyncStream<Int32>.makeStream()
        process.terminationHandler = { process in
            exited.continuation.yield(process.terminationStatus)
            exited.continuation.finish()
        }
        try process.run()
        let watchdog = Task {
            try await Task.sleep(for: limit + .seconds(5))
            process.terminate()
        }
        var status: Int32 = -1
        for await code in exited.stream { status = code }
        watchdog.cancel()
        try? out.close()
        try? err.close()
        return Result(
            status: status,
            stdout: (try? String(contentsOf: outURL, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOf: errURL, encoding: .utf8)) ?? ""
        )
    }
}
