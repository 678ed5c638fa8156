import AccessoryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `accessory-http bridge` with the config file's `[bridge NAME]` sections (issue 11): several
/// accessories in one process, and SIGHUP reloading only what changed.
@Suite("bridge: config file sections")
struct BridgeConfigTests {
    let scratch: Scratch

    init() throws {
        self.scratch = try Scratch()
    }

    private func curl(_ socket: String, _ path: String) async throws -> RunResult {
        let curl = try #require(which("curl"), "curl is not installed; run scripts/bootstrap")
        return try await run(
            curl,
            ["-sS", "--max-time", "20", "--unix-socket", socket, "http://accessory" + path],
            scratch: self.scratch,
            timeout: 30
        )
    }

    /// The Host header the accessory saw for a request through `socket`, or nil if none answered.
    private func hostSeen(through socket: String) async throws -> String? {
        let echo = try await self.curl(socket, "/echo")
        guard echo.status == 0,
            let json = try? JSONSerialization.jsonObject(with: Data(echo.stdout)) as? [String: Any],
            let headers = json["headers"] as? [String: String]
        else { return nil }
        return headers["host"]
    }

    /// Waits until `socket` answers (the socket file exists from bind(2), before listen(2)).
    private func answers(_ socket: String, while child: Child) async -> Bool {
        await eventually {
            guard child.isRunning, FileManager.default.fileExists(atPath: socket) else { return !child.isRunning }
            let fd = connectUnixSocket(socket)
            if let fd { close(fd) }
            return fd != nil
        } && child.isRunning
    }

    private func section(_ name: String, host: String? = nil) -> String {
        var text = "[bridge \(name)]\ndevice = emulator\nlisten = unix:\(self.scratch.file(name + ".sock"))\n"
        if let host { text += "host = \(host)\n" }
        return text + "\n"
    }

    @Test("two sections are two accessories; SIGHUP adds, removes and changes only what changed")
    func sectionsAndReload() async throws {
        let config = self.scratch.file("bridges.conf")
        try (self.section("one") + self.section("two", host: "second")).write(
            toFile: config,
            atomically: true,
            encoding: .utf8
        )
        let bridge = try startCLI(["bridge", "--config", config], scratch: self.scratch)
        defer {
            bridge.signal(SIGKILL)
            _ = bridge.process.waitUntilExitOrKill()
        }
        let one = self.scratch.file("one.sock")
        let two = self.scratch.file("two.sock")
        let three = self.scratch.file("three.sock")
        guard await self.answers(one, while: bridge), await self.answers(two, while: bridge) else {
            Issue.record("the bridge did not start: \(await bridge.finish(timeout: 2))")
            return
        }
        #expect(try await self.hostSeen(through: one) == "accessory")
        #expect(try await self.hostSeen(through: two) == "second", "each section has its own Host")

        // Reload: "two" removed, "three" added, "one" unchanged (moved in the file).
        try (self.section("three", host: "third") + "# moved\n" + self.section("one")).write(
            toFile: config,
            atomically: true,
            encoding: .utf8
        )
        bridge.signal(SIGHUP)
        #expect(await self.answers(three, while: bridge), "the new section was not started: \(bridge.stderrSoFar)")
        #expect(try await self.hostSeen(through: three) == "third")
        #expect(
            await eventually { !FileManager.default.fileExists(atPath: two) },
            "the removed section's socket stayed"
        )
        #expect(try await self.curl(two, "/status").status != 0, "the removed section still answered")
        #expect(try await self.hostSeen(through: one) == "accessory")
        #expect(
            !bridge.stderrSoFar.contains("[one] stopped"),
            "an unchanged section was restarted: \(bridge.stderrSoFar)"
        )

        // A changed section is restarted with its new settings.
        try (self.section("three", host: "changed") + self.section("one")).write(
            toFile: config,
            atomically: true,
            encoding: .utf8
        )
        bridge.signal(SIGHUP)
        let changed = await eventually { bridge.stderrSoFar.contains("[three] changed: stopping") }
        #expect(changed, "\(bridge.stderrSoFar)")
        #expect(await self.answers(three, while: bridge))
        // The old bridge stops, then the new one binds: ask until the new one answers.
        var host: String?
        for _ in 0..<(100 * TimeBounds.factor) where host != "changed" {
            host = try await self.hostSeen(through: three)
            if host != "changed" { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(host == "changed", "the changed section still runs its old settings")

        // A file that no longer parses changes nothing; the error names the file and line.
        try "[bridge one]\ndevice = emulator\nlisten = unix:\(one)\nlisten-typo = 1\n".write(
            toFile: config,
            atomically: true,
            encoding: .utf8
        )
        bridge.signal(SIGHUP)
        #expect(await eventually { bridge.stderrSoFar.contains("listen-typo") }, "\(bridge.stderrSoFar)")
        #expect(bridge.stderrSoFar.contains("\(config):4"), "\(bridge.stderrSoFar)")
        #expect(try await self.hostSeen(through: one) == "accessory")
        #expect(try await self.hostSeen(through: three) == "changed", "a bad reload stopped a section")

        bridge.signal(SIGTERM)
        let result = await bridge.finish(timeout: 10)
        #expect(result.status == 0, "\(result)")
        for socket in [one, three] {
            #expect(!FileManager.default.fileExists(atPath: socket), "\(socket) was left behind")
        }
    }

    /// 16 bridges, each sent SIGHUP the moment its socket first answers: every one logs it and
    /// goes on serving. (The signal source used to go live some time after the listeners, so a
    /// SIGHUP in between was lost under load.)
    @Test("SIGHUP to a bridge given --device and --listen is logged, and it goes on serving")
    func hangUpWithoutSections() async throws {
        for attempt in 1...16 {
            let socket = self.scratch.file("hup-\(attempt).sock")
            let bridge = try startCLI(
                ["bridge", "--device", "emulator", "--listen", "unix:" + socket],
                scratch: self.scratch
            )
            defer {
                bridge.signal(SIGKILL)
                _ = bridge.process.waitUntilExitOrKill()
            }
            guard await self.answers(socket, while: bridge) else {
                Issue.record("attempt \(attempt): the bridge did not start: \(await bridge.finish(timeout: 2))")
                return
            }
            bridge.signal(SIGHUP)
            #expect(
                await eventually { bridge.stderrSoFar.contains("nothing to reload") },
                "attempt \(attempt): \(bridge.stderrSoFar)"
            )
            #expect(bridge.isRunning, "attempt \(attempt): SIGHUP ended the bridge")
            #expect(try await self.hostSeen(through: socket) == "accessory", "attempt \(attempt)")
            bridge.signal(SIGTERM)
            let result = await bridge.finish(timeout: 10)
            #expect(result.status == 0, "attempt \(attempt): \(result)")
        }
    }

    @Test(
        "a section without a listener, an unknown key, a duplicate name, and --device without --listen are usage errors"
    )
    func badSections() async throws {
        let config = self.scratch.file("bad.conf")
        let cases: [(text: String, extra: [String], expected: String)] = [
            ("[bridge a]\ndevice = emulator\n", [], "\(config):1: [bridge a] has no 'listen"),
            ("[bridge a]\nlisten = unix:/tmp/x.sock\n", [], "[bridge a] has no 'device"),
            ("[bridge a]\ndevice = emulator\nlisten = unix:/tmp/x.sock\nport = 8\n", [], "\(config):4"),
            (self.section("a") + self.section("a"), [], "a second [bridge a]"),
            ("[bridge a b]\n", [], "expected a section '[bridge NAME]'"),
            (self.section("a"), ["--device", "emulator"], "--device needs --listen"),
        ]
        for (text, extra, expected) in cases {
            try text.write(toFile: config, atomically: true, encoding: .utf8)
            let result = try await runCLI(["bridge", "--config", config] + extra, scratch: self.scratch)
            #expect(result.status == 64, "\(text): \(result)")
            #expect(result.stderr.contains(expected), "\(text): \(result.stderr)")
        }
        try "device = emulator\n".write(toFile: config, atomically: true, encoding: .utf8)
        let none = try await runCLI(["bridge", "--config", config], scratch: self.scratch)
        #expect(none.status == 64 && none.stderr.contains("[bridge NAME]"), "\(none)")
    }

    /// TLS to the accessory per section (issue 11): one HTTPS accessory (`serve --cert` on a unix
    /// socket) behind three sections, trusted by its CA and name, refused for a pin it does not
    /// match (502 naming the pin), and spoken to in plain HTTP with `tls = no` (502); each
    /// section's verdict is its own, and the good one answers again after the others failed.
    @Test("TLS settings per [bridge NAME] section")
    func tlsPerSection() async throws {
        let (_, serving) = try await makeSelfSignedCertificate(named: "meter", scratch: self.scratch)
        // One HTTPS accessory per section: a bridge owns its device, so no two sections share one.
        var servers: [Child] = []
        defer {
            for server in servers {
                server.signal(SIGKILL)
                _ = server.process.waitUntilExitOrKill()
            }
        }
        for name in ["trusted", "pinned", "plain"] {
            let device = self.scratch.file(name + "-device.sock")
            servers.append(
                try startCLI(
                    ["serve", "--device", "unix:" + device] + serving,
                    scratch: self.scratch
                )
            )
            try #require(await eventually { FileManager.default.fileExists(atPath: device) }, "serve did not bind")
        }
        let wrongPin = "sha256:" + String(repeating: "A", count: 43) + "="
        func section(_ name: String, _ settings: String) -> String {
            let device = self.scratch.file(name + "-device.sock")
            return
                "[bridge \(name)]\ndevice = unix:\(device)\nlisten = unix:\(self.scratch.file(name + ".sock"))\n\(settings)\n"
        }
        let config = self.scratch.file("tls.conf")
        try [
            section("trusted", "tls-name = meter\ncacert = \(self.scratch.file("meter.pem"))"),
            section("pinned", "tls-name = meter\npin = \(wrongPin)"),
            section("plain", "tls = no"),
        ].joined(separator: "\n").write(toFile: config, atomically: true, encoding: .utf8)
        let bridge = try startCLI(["bridge", "--config", config], scratch: self.scratch)
        defer {
            bridge.signal(SIGKILL)
            _ = bridge.process.waitUntilExitOrKill()
        }
        for name in ["trusted", "pinned", "plain"] {
            guard await self.answers(self.scratch.file(name + ".sock"), while: bridge) else {
                Issue.record("the bridge did not start \(name): \(await bridge.finish(timeout: 2))")
                return
            }
        }
        let curl = try #require(which("curl"), "curl is not installed; run scripts/bootstrap")
        func get(_ name: String) async throws -> (code: String, body: String) {
            let result = try await run(
                curl,
                [
                    "-sS", "--max-time", "20", "-w", "\n%{http_code}", "--unix-socket",
                    self.scratch.file(name + ".sock"), "http://accessory/status",
                ],
                scratch: self.scratch,
                timeout: 30
            )
            let lines = result.stdoutText.split(separator: "\n", omittingEmptySubsequences: false)
            return (String(lines.last ?? ""), lines.dropLast().joined(separator: "\n"))
        }
        let trusted = try await get("trusted")
        #expect(trusted.code == "200" && trusted.body.contains("serialNumber"), "\(trusted)")
        let pinned = try await get("pinned")
        #expect(pinned.code == "502" && pinned.body.contains("pin"), "\(pinned)")
        let plain = try await get("plain")
        #expect(plain.code == "502", "\(plain)")
        let again = try await get("trusted")
        #expect(again.code == "200", "\(again)")

        bridge.signal(SIGTERM)
        let stopped = await bridge.finish(timeout: 10)
        #expect(stopped.status == 0, "\(stopped)")

        // A section's TLS settings are checked as the command line's are, when it starts.
        try section("trusted", "tls = no\ntls-name = meter").write(toFile: config, atomically: true, encoding: .utf8)
        let refused = try await runCLI(["bridge", "--config", config], scratch: self.scratch)
        #expect(refused.status == 64 && refused.stderr.contains("'tls = no' with TLS settings"), "\(refused)")
        try section("trusted", "tls = yes\ntls-min-version = 0.9").write(
            toFile: config,
            atomically: true,
            encoding: .utf8
        )
        let badVersion = try await runCLI(["bridge", "--config", config], scratch: self.scratch)
        #expect(badVersion.status == 64 && badVersion.stderr.contains("[bridge trusted]"), "\(badVersion)")
    }
}
