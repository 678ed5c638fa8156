import AccessoryTestSupport
import Foundation
import Testing

/// The documented exit codes (ExitStatus.swift) and the messages that go with them.
@Suite("exit status")
struct ExitStatusTests {
    let scratch: Scratch

    init() throws {
        self.scratch = try Scratch()
    }

    func cli(
        _ arguments: [String],
        env: [String: String] = [:],
        timeout: Double = 20,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> RunResult {
        try await runCLI(arguments, scratch: self.scratch, env: env, timeout: timeout, sourceLocation: sourceLocation)
    }

    @Test func failOnAnErrorStatusExits22WithNoBody() async throws {
        let result = try await cli(["--device", "emulator", "get", "--fail", "/no/such/endpoint"])
        #expect(result.status == 22, "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
        #expect(result.stderr.contains("404"), "\(result)")
    }

    @Test func withoutFailAnErrorStatusPrintsTheBodyAndExits0() async throws {
        let result = try await cli(["--device", "emulator", "get", "/no/such/endpoint"])
        #expect(result.status == 0, "\(result)")
        #expect(result.json?["status"] as? Int == 404, "\(result)")
    }

    @Test(arguments: ["get", "download"])
    func failWithOutputLeavesTheFileAlone(command: String) async throws {
        let path = scratch.file("\(command).out")
        let result = try await cli(["--device", "emulator", command, "--fail", "/nothing", "-o", path])
        #expect(result.status == 22, "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
        #expect(!FileManager.default.fileExists(atPath: path), "the error body is not saved as the download")

        // An existing file is not replaced by the error body either.
        try Data("previous".utf8).write(to: URL(fileURLWithPath: path))
        let again = try await cli(["--device", "emulator", command, "--fail", "/nothing", "-o", path])
        #expect(again.status == 22, "\(again)")
        #expect(readFile(path) == Array("previous".utf8))

        // Without --fail the body is written, as curl does.
        let plain = try await cli(["--device", "emulator", command, "/nothing", "-o", path])
        #expect(plain.status == 0, "\(plain)")
        #expect(String(decoding: readFile(path) ?? [], as: UTF8.self).contains("\"status\":404"))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: scratch.path).filter {
            $0.contains(".part")
        }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    @Test func noDeviceAnywhereIsAUsageErrorThatNamesEveryWay() async throws {
        let result = try await cli(["get", "/status"])
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains("--device"), "\(result)")
        #expect(result.stderr.contains("ACCESSORY_HTTP_DEVICE"), "\(result)")
        #expect(result.stderr.contains(scratch.configFile.path), "names this user's config file: \(result)")
        #expect(result.stdout.isEmpty, "\(result)")
    }

    @Test(arguments: ["bogus:thing", "/dev/ttyACM0", "serial:/dev/x?baud=fast", "unix:", "usb:12:34"])
    func aBadDeviceSpecListsTheAcceptedForms(spec: String) async throws {
        let result = try await cli(["--device", spec, "get", "/status"])
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains("Accepted device specs"), "\(result)")
        #expect(result.stderr.contains("serial:PATH"), "\(result)")
        #expect(result.stderr.contains("exec:COMMAND"), "\(result)")
    }

    @Test(arguments: [
        "X-Evil: 1\nX-Injected: 2", "X-Evil: 1\r\nX-Injected: 2", "X-Evil: a\rb", "No colon here", "Bad Name: 1",
    ])
    func aHeaderWithALineBreakOrBadSyntaxIsAUsageError(header: String) async throws {
        let result = try await cli(["--device", "emulator", "get", "/echo", "-H", header])
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains("-H"), "\(result)")
        #expect(result.stdout.isEmpty, "nothing was sent: \(result)")
    }

    @Test func aTimeoutExits75Quickly() async throws {
        // The answer would take 30 s; the CLI must end by its 0.5 s deadline plus its own
        // start-up (a debug build's, under the other tests' load: 3.35 s was seen in CI, and
        // over 5 s for a CLI started as the suites start).
        let result = try await cli(["--device", "emulator", "get", "--timeout", "0.5", "/delay/30"], timeout: 40)
        #expect(result.status == 75, "\(result)")
        #expect(result.elapsed < TimeBounds.scaled(.seconds(12)), "\(result)")
        #expect(!result.stderr.isEmpty, "\(result)")
    }

    @Test func aTimeoutFromTheConfigFileApplies() async throws {
        // As above: the answer would take 30 s, start-up under load is most of the bound.
        try scratch.writeConfig("device = emulator\ntimeout = 0.5\n")
        let result = try await cli(["get", "/delay/30"], timeout: 40)
        #expect(result.status == 75, "\(result)")
        #expect(result.elapsed < TimeBounds.scaled(.seconds(12)), "\(result)")
    }

    @Test func aZeroOrNegativeTimeoutIsAUsageError() async throws {
        let zero = try await cli(["--device", "emulator", "get", "--timeout", "0", "/status"])
        #expect(zero.status == 64, "\(zero)")
        let negative = try await cli(["--device", "emulator", "get", "--max-redirs=-1", "/status"])
        #expect(negative.status == 64, "\(negative)")
    }

    /// `inf` and 1e300 parse as Doubles; a Duration made from them trapped (the CLI died with
    /// SIGILL) before the bound above was checked.
    @Test(arguments: [
        ["get", "--timeout", "inf"], ["get", "--timeout", "1e300"], ["get", "--connect-timeout", "inf"],
    ])
    func anEndlessTimeoutIsAUsageError(options: [String]) async throws {
        let result = try await cli(["--device", "emulator"] + options + ["/status"])
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains("at most 31536000"), "\(result)")
    }

    @Test func anEndlessTimeoutInTheConfigFileIsAUsageError() async throws {
        try scratch.writeConfig("device = emulator\ntimeout = inf\n")
        let result = try await cli(["get", "/status"])
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains(scratch.configFile.path + ":2:"), "\(result)")
    }

    @Test func aDeviceThatExitsIsATransportFailureThatSaysHow() async throws {
        let result = try await cli(
            ["--device", "exec:echo 'no such accessory' >&2; exit 3", "get", "/status"],
            timeout: 15
        )
        #expect(result.status == 69, "\(result)")
        #expect(result.stderr.contains("exited with status 3"), "\(result)")
        #expect(result.stderr.contains("no such accessory"), "the child's stderr is quoted: \(result)")
        #expect(result.elapsed < TimeBounds.scaled(.seconds(10)), "start-up under load included: \(result)")
    }

    @Test func aDeviceThatSpeaksGarbageIsAProtocolError() async throws {
        let result = try await cli(
            ["--device", "exec:printf 'garbage\\r\\n\\r\\n'; sleep 1", "get", "/status"],
            timeout: 15
        )
        #expect(result.status == 76, "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
        #expect(result.elapsed < TimeBounds.scaled(.seconds(10)), "start-up under load included: \(result)")
    }

    /// A deadline ends the call by then: the CLI does not drain the rest of a trickling body
    /// before it exits (before: the 1 s deadline plus the 5 s drain timeout).
    @Test func aTimeoutEndsTheCallWhileTheDeviceTrickles() async throws {
        // Reads the request head (to its empty line), then answers slowly.
        let device =
            "exec:sed -n '/^\\r$/q'; printf 'HTTP/1.1 200 OK\\r\\nContent-Length: 100\\r\\n\\r\\n'; "
            + "while printf x; do sleep 0.5; done"
        // The same exchange answered at once: what starting the CLI and the device and ending
        // them costs here, now (under AddressSanitizer on a loaded machine, seconds).
        let quick = "exec:sed -n '/^\\r$/q'; printf 'HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nxx'"
        let baseline = try await cli(["--device", quick, "get", "/x"], timeout: 15)
        #expect(baseline.status == 0, "\(baseline)")
        let result = try await cli(["--device", device, "get", "--timeout", "1", "/x"], timeout: 15)
        #expect(result.status == 75, "\(result)")
        // The old behaviour took the 1 s deadline plus the 5 s drain on top of that cost; a
        // fixed bound failed once under AddressSanitizer (6.35 s against 5.8 s) on a CI machine
        // running CLITests in parallel, so the bound follows the measured cost: the deadline
        // plus 2.5 s of headroom, still short of the drain.
        let bound = baseline.elapsed + .seconds(1) + .milliseconds(2500)
        #expect(result.elapsed < bound, "\(result); the quick exchange took \(baseline.elapsed)")
    }

    @Test func aMissingUploadFileIsAFileError() async throws {
        let result = try await cli(["--device", "emulator", "post", "/upload", "-d", "@/nonexistent/file.bin"])
        #expect(result.status == 74, "\(result)")
        #expect(result.stderr.contains("/nonexistent/file.bin"), "\(result)")
    }

    @Test(arguments: [[], ["--fail"]])
    func anUnwritableOutputFileIsAFileError(extra: [String]) async throws {
        let result = try await cli(
            ["--device", "emulator", "get", "/bytes/100", "-o", "/nonexistent/dir/out.bin"] + extra
        )
        #expect(result.status == 74, "\(result)")
        #expect(result.stderr.contains("cannot write /nonexistent/dir/out.bin"), "\(result)")
        #expect(!result.stderr.contains(".fail"), "no staging name in the message: \(result)")
    }

    @Test func aMissingUnixSocketIsATransportFailure() async throws {
        let result = try await cli(["--device", "unix:" + scratch.file("nobody-listens.sock"), "get", "/status"])
        #expect(result.status == 69, "\(result)")
        #expect(result.stderr.contains("nobody-listens.sock"), "\(result)")
    }

    @Test func usbIsNotBuiltYet() async throws {
        let result = try await cli(["--device", "usb:1209:0001", "get", "/status"])
        #expect(result.status == 69, "\(result)")
        #expect(result.stderr.contains("USB"), "\(result)")
    }

    @Test func unknownOptionIsAUsageError() async throws {
        let result = try await cli(["--device", "emulator", "get", "--no-such-option", "/status"])
        #expect(result.status == 64, "\(result)")
    }

    @Test func getRefusesData() async throws {
        let result = try await cli(["--device", "emulator", "get", "/echo", "-d", "x"])
        #expect(result.status == 64, "\(result)")
    }
}

/// `--device` beats `$ACCESSORY_HTTP_DEVICE` beats `device = …` in the config file.
@Suite("device choice")
struct DeviceChoiceTests {
    let scratch: Scratch

    init() throws {
        self.scratch = try Scratch()
    }

    var nowhere: String { "unix:" + scratch.file("nowhere.sock") }

    @Test func theConfigFileAlone() async throws {
        try scratch.writeConfig("# my accessory\n\ndevice = emulator\n")
        let result = try await runCLI(["get", "/status"], scratch: scratch)
        #expect(result.status == 0, "\(result)")
        #expect(result.json?["model"] is String, "\(result)")
    }

    @Test func theEnvironmentBeatsTheConfigFile() async throws {
        try scratch.writeConfig("device = \(nowhere)\n")
        let result = try await runCLI(["get", "/status"], scratch: scratch, env: ["ACCESSORY_HTTP_DEVICE": "emulator"])
        #expect(result.status == 0, "\(result)")

        try scratch.writeConfig("device = emulator\n")
        let loser = try await runCLI(["get", "/status"], scratch: scratch, env: ["ACCESSORY_HTTP_DEVICE": nowhere])
        #expect(loser.status == 69, "the environment's device was used: \(loser)")
        #expect(loser.stderr.contains("nowhere.sock"), "\(loser)")
    }

    @Test func theOptionBeatsTheEnvironment() async throws {
        try scratch.writeConfig("device = \(nowhere)\n")
        let result = try await runCLI(
            ["--device", "emulator", "get", "/status"],
            scratch: scratch,
            env: ["ACCESSORY_HTTP_DEVICE": nowhere]
        )
        #expect(result.status == 0, "\(result)")

        let loser = try await runCLI(
            ["--device", nowhere, "get", "/status"],
            scratch: scratch,
            env: ["ACCESSORY_HTTP_DEVICE": "emulator"]
        )
        #expect(loser.status == 69, "the option's device was used: \(loser)")
    }

    @Test func aBadSpecInTheEnvironmentNamesTheVariable() async throws {
        let result = try await runCLI(["get", "/status"], scratch: scratch, env: ["ACCESSORY_HTTP_DEVICE": "nonsense"])
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains("ACCESSORY_HTTP_DEVICE"), "\(result)")
    }

    @Test func anUnknownKeyInTheConfigFileNamesFileAndLine() async throws {
        try scratch.writeConfig("device = emulator\n# comment\ncolour = blue\n")
        let result = try await runCLI(["get", "/status"], scratch: scratch)
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains(scratch.configFile.path + ":3:"), "\(result)")
        #expect(result.stderr.contains("colour"), "\(result)")
        // Even when --device makes the file's device irrelevant, a typo is not ignored.
        let withOption = try await runCLI(["--device", "emulator", "get", "/status"], scratch: scratch)
        #expect(withOption.status == 64, "\(withOption)")
    }

    @Test func theConfigFileFallsBackToHOME() async throws {
        let home = scratch.url.appendingPathComponent(".config/accessory-http")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        try Data("device = emulator\n".utf8).write(to: home.appendingPathComponent("config"))
        let result = try await runCLI(["get", "/status"], scratch: scratch, env: ["XDG_CONFIG_HOME": ""])
        #expect(result.status == 0, "\(result)")
    }

    /// The XDG spec: a relative XDG_CONFIG_HOME is ignored, so a settings file under the working
    /// directory (say, in a repository just cloned) cannot choose an `exec:` device.
    @Test func aRelativeXDGConfigHomeIsIgnored() async throws {
        let planted = scratch.url.appendingPathComponent("relative/accessory-http")
        try FileManager.default.createDirectory(at: planted, withIntermediateDirectories: true)
        let marker = scratch.file("ran-the-planted-device")
        try Data("device = exec:touch '\(marker)'\n".utf8).write(to: planted.appendingPathComponent("config"))
        let result = try await runCLI(["get", "/status"], scratch: scratch, env: ["XDG_CONFIG_HOME": "relative"])
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains("--device"), "\(result)")
        #expect(!FileManager.default.fileExists(atPath: marker), "the planted exec: device ran: \(result)")

        // It falls back to $HOME/.config, as when XDG_CONFIG_HOME is unset.
        let home = scratch.url.appendingPathComponent(".config/accessory-http")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        try Data("device = emulator\n".utf8).write(to: home.appendingPathComponent("config"))
        let fallback = try await runCLI(["get", "/status"], scratch: scratch, env: ["XDG_CONFIG_HOME": "relative"])
        #expect(fallback.status == 0, "\(fallback)")
        #expect(!FileManager.default.fileExists(atPath: marker), "the planted exec: device ran: \(fallback)")
    }

    @Test func theConfigOptionPicksAnotherFile() async throws {
        let path = scratch.file("other.conf")
        try Data("device = emulator\nhost = my-accessory\n".utf8).write(to: URL(fileURLWithPath: path))
        let result = try await runCLI(["--config", path, "get", "/echo"], scratch: scratch)
        #expect(result.status == 0, "\(result)")
        let headers = result.json?["headers"] as? [String: String]
        #expect(headers?["host"] == "my-accessory", "\(result)")
    }

    @Test func theHostOptionBeatsTheConfigFile() async throws {
        try scratch.writeConfig("device = emulator\nhost = from-config\n")
        let result = try await runCLI(["--host", "from-option", "get", "/echo"], scratch: scratch)
        #expect(result.status == 0, "\(result)")
        let headers = result.json?["headers"] as? [String: String]
        #expect(headers?["host"] == "from-option", "\(result)")
    }
}

/// SIGINT and SIGTERM end a request promptly with 130 and leave no partial file behind.
@Suite("interruption")
struct InterruptionTests {
    let scratch: Scratch

    init() throws {
        self.scratch = try Scratch()
    }

    @Test(arguments: zip([SIGINT, SIGTERM, SIGINT], ["download", "download", "get"]))
    func aSignalInterruptsARequest(signal: Int32, command: String) async throws {
        let path = scratch.file("interrupted-\(signal)-\(command).bin")
        let child = try startCLI(["--device", "emulator", "-v", command, "/delay/30", "-o", path], scratch: scratch)
        // Signal once the request is on the wire, so the exchange itself is what gets interrupted.
        let sent = await eventually { child.stderrSoFar.contains("> GET /delay/30") || !child.isRunning }
        #expect(sent, "the request was never sent: \(child.stderrSoFar)")
        let signalled = ContinuousClock.now
        child.signal(signal)
        let result = await child.finish(timeout: TimeBounds.sanitized ? 15 : 5)
        let afterSignal = ContinuousClock.now - signalled
        #expect(!result.timedOut, "\(result)")
        #expect(result.status == 130, "\(result)")
        #expect(result.stderr.hasSuffix("accessory-http: interrupted\n"), "\(result)")
        // Under AddressSanitizer, with the target's tests in parallel on 2 cores, one CI run took
        // 2.25 s, and with LeakSanitizer's scan at exit 2.8-3.5 s; the point is that the 30 s
        // exchange is not waited for.
        #expect(
            afterSignal < (TimeBounds.sanitized ? .seconds(10) : .seconds(2)),
            "the pending exchange is abandoned, not waited for (\(afterSignal)): \(result)"
        )
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: scratch.path).filter {
            $0.hasPrefix("interrupted")
        }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }
}
