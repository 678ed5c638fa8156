import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// DNS-SD advertisement of the bridge's TCP listeners through avahi-publish (issue 11, as
/// ipp-usb does), checked with a real avahi-daemon and avahi-browse: what is advertised, what
/// is not (loopback listeners, `--dns-sd off`), and that an advertisement ends with its bridge,
/// even one killed with SIGKILL.
@Suite("bridge: DNS-SD", .serialized)
struct BridgeDNSSDTests {
    let scratch: Scratch

    init() throws {
        self.scratch = try Scratch()
    }

    /// avahi-browse's resolved `_http._tcp` entries: `=;IFACE;PROTO;NAME;TYPE;DOMAIN;HOST;ADDRESS;PORT;TXT`.
    private func browse() async throws -> [[Substring]] {
        let browse = try #require(
            which("avahi-browse"),
            "avahi-browse is not installed (avahi-utils); run scripts/bootstrap"
        )
        let result = try await run(browse, ["-rpt", "_http._tcp"], scratch: self.scratch, timeout: 20)
        return result.stdoutText.split(separator: "\n").filter { $0.hasPrefix("=;") }
            .map { $0.split(separator: ";", maxSplits: 9, omittingEmptySubsequences: false) }
            .filter { $0.count == 10 }
    }

    /// The entries for `port`, polled until there are some (`present`) or none, at most 15 s.
    private func entries(port: Int, present: Bool) async throws -> [[Substring]] {
        let deadline = ContinuousClock.now + .seconds(15)
        while true {
            let found = try await self.browse().filter { $0[8] == "\(port)" }
            if found.isEmpty != present || ContinuousClock.now > deadline { return found }
            try await Task.sleep(for: .milliseconds(250))
        }
    }

    /// Starts a bridge with `arguments` and returns it with the ports it printed, in order.
    private func startBridge(_ arguments: [String]) async throws -> (Child, [Int]) {
        let listeners = arguments.enumerated().filter { $0.offset > 0 && arguments[$0.offset - 1] == "--listen" }.count
        let bridge = try startCLI(["bridge", "--device", "emulator"] + arguments, scratch: self.scratch)
        let ports = { () -> [Int] in
            bridge.stderrSoFar.split(separator: "\n").filter { $0.contains("serving emulator on tcp:") }
                .compactMap { $0.split(separator: ":").last.flatMap { Int($0) } }
        }
        let up = await eventually { ports().count == listeners || !bridge.isRunning }
        guard up, bridge.isRunning else {
            let result = await bridge.finish(timeout: 2)
            throw AvahiFailure("the bridge did not start: \(result)")
        }
        return (bridge, ports())
    }

    @Test("reachable listeners are advertised with the accessory's model and serial until the bridge ends")
    func advertisement() async throws {
        let stopAvahi = try await AvahiDaemon.ensureRunning(scratch: self.scratch)
        do {
            try await self.advertisementSteps()
        } catch {
            await stopAvahi()
            throw error
        }
        await stopAvahi()
    }

    private func advertisementSteps() async throws {
        // One listener others can reach, one on loopback: only the first is advertised.
        let (bridge, ports) = try await self.startBridge([
            "--listen", "tcp:0.0.0.0:0", "--listen", "tcp:127.0.0.1:0", "--allow-remote",
        ])
        defer { bridge.signal(SIGKILL) }
        let found = try await self.entries(port: ports[0], present: true)
        #expect(!found.isEmpty, "nothing advertised for port \(ports[0]): \(bridge.stderrSoFar)")
        for entry in found {
            #expect(entry[3] == "AH-EMU-1\\032EMU0001", "\(entry)")
            #expect(entry[9].contains("\"model=AH-EMU-1\"") && entry[9].contains("\"serial=EMU0001\""), "\(entry)")
            #expect(entry[9].contains("\"path=/\""), "\(entry)")
        }
        #expect(try await self.browse().allSatisfy { $0[8] != "\(ports[1])" }, "a loopback listener was advertised")
        // It answers where it is advertised.
        let curl = try #require(which("curl"), "curl is not installed; run scripts/bootstrap")
        let status = try await run(
            curl,
            ["-sS", "--max-time", "10", "http://127.0.0.1:\(ports[0])/status"],
            scratch: self.scratch
        )
        #expect(status.stdoutText.contains("EMU0001"), "\(status)")
        bridge.signal(SIGTERM)
        let ended = await bridge.finish(timeout: 15)
        #expect(ended.status == 0, "\(ended)")
        #expect(ended.stderr.contains("dns-sd: advertising \"AH-EMU-1 EMU0001\""), "\(ended.stderr)")
        #expect(try await self.entries(port: ports[0], present: false).isEmpty, "still advertised after SIGTERM")

        // A name of one's own; a bridge killed with SIGKILL takes its advertisement with it,
        // three times in a row (the publisher's death signal, not a clean shutdown).
        for round in 0..<3 {
            let (killed, killedPorts) = try await self.startBridge([
                "--listen", "tcp:0.0.0.0:0", "--allow-remote", "--dns-sd", "on", "--dns-sd-name",
                "Bench Meter \(round)",
            ])
            defer { killed.signal(SIGKILL) }
            let named = try await self.entries(port: killedPorts[0], present: true)
            #expect(named.contains { $0[3] == "Bench\\032Meter\\032\(round)" }, "\(named)")
            killed.signal(SIGKILL)
            _ = await killed.finish(timeout: 10)
            #expect(
                try await self.entries(port: killedPorts[0], present: false).isEmpty,
                "round \(round): still advertised after the bridge was killed"
            )
        }

        // --dns-sd off: nothing, while the bridge serves.
        let (quiet, quietPorts) = try await self.startBridge([
            "--listen", "tcp:0.0.0.0:0", "--allow-remote", "--dns-sd", "off",
        ])
        defer { quiet.signal(SIGKILL) }
        try await Task.sleep(for: .seconds(2))
        #expect(try await self.browse().allSatisfy { $0[8] != "\(quietPorts[0])" }, "advertised with --dns-sd off")
        quiet.signal(SIGTERM)
        _ = await quiet.finish(timeout: 15)
    }

    @Test("--dns-sd on without avahi-publish exits 69 and says what to install; a bad value is a usage error")
    func requiredButMissing() async throws {
        let missing = try await runCLI(
            ["bridge", "--device", "emulator", "--listen", "tcp:0.0.0.0:0", "--allow-remote", "--dns-sd", "on"],
            scratch: self.scratch,
            env: ["PATH": self.scratch.path]
        )
        #expect(missing.status == 69, "\(missing)")
        #expect(
            missing.stderr.contains("avahi-publish was not found") && missing.stderr.contains("avahi-utils"),
            "\(missing)"
        )
        let bad = try await runCLI(
            ["bridge", "--device", "emulator", "--listen", "tcp:127.0.0.1:0", "--dns-sd", "maybe"],
            scratch: self.scratch
        )
        #expect(bad.status == 64 && bad.stderr.contains("auto, on or off"), "\(bad)")
    }
}
