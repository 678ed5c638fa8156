import AccessoryClient
import AccessoryTransport
import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// DNS-SD advertisement of the bridge's TCP listeners (``DNSSDConfiguration``): one
/// `avahi-publish -s NAME _http._tcp PORT TXT…` per listener that other machines can reach,
/// started once the bridge runs and ended (SIGTERM, and reaped) when it shuts down.
extension AccessoryBridge {
    /// With advertising required, the publisher must be installed: checked before anything binds.
    func checkDNSSD() throws(BridgeError) {
        let settings = self.configuration.dnsSD
        guard settings.mode == .on, Self.executable(settings.publisher) == nil else { return }
        throw BridgeError(
            .dnsSDUnavailable,
            "DNS-SD advertisement is on but \(settings.publisher) was not found on PATH; install avahi-utils and run avahi-daemon, or set it to auto or off"
        )
    }

    /// Starts a publisher for each reachable TCP listener. Runs as a task beside ``run()``.
    func advertise() async {
        let settings = self.configuration.dnsSD
        let listeners = self.state.withLock { $0.boundTCP }
        let reachable = listeners.filter { !BridgeListener.tcp(host: $0.host, port: $0.port).isLocal }
        guard !reachable.isEmpty else {
            if !listeners.isEmpty {
                self.logger.info(
                    "dns-sd: not advertised: every TCP listener is on loopback, which avahi-publish cannot announce without sending other machines to an address that refuses them"
                )
            }
            return
        }
        guard let executable = Self.executable(settings.publisher) else {
            self.logger.debug("dns-sd: not advertised: \(settings.publisher) is not installed")
            return
        }
        let identity = await self.accessoryIdentity()
        guard !Task.isCancelled else { return }
        let base = settings.instanceName ?? identity.instanceName ?? self.configuration.name
        let txt = ["txtvers=1", "path=/"] + identity.txt
        for listener in reachable {
            let name = String((reachable.count > 1 ? "\(base) (port \(listener.port))" : base).utf8.prefix(63)) ?? base
            await self.startPublisher([executable, "-s", name, "_http._tcp", String(listener.port)] + txt, name: name)
        }
    }

    private func startPublisher(_ arguments: [String], name: String) async {
        let logger = self.logger
        let publisher: HelperProcess
        do {
            publisher = try await HelperProcess.start(arguments) { line in logger.info("dns-sd: \(line)") }
        } catch {
            logger.warning("dns-sd: cannot start \(arguments[0]): \(error)")
            return
        }
        let kept = self.state.withLock { state -> Bool in
            guard !state.isShuttingDown else { return false }
            state.publishers.append(publisher)
            return true
        }
        guard kept else {
            await publisher.stop()
            return
        }
        logger.info("dns-sd: advertising \"\(name)\" as _http._tcp on port \(arguments[4])")
        publisher.exited.whenComplete { _ in
            guard !self.state.withLock({ $0.isShuttingDown }) else { return }
            logger.warning(
                "dns-sd: \(arguments[0]) \(publisher.exitDescription ?? "ended"): \"\(name)\" is no longer advertised (is avahi-daemon running?)"
            )
        }
    }

    /// Ends every publisher (the advertisements go with them) and waits until they are reaped.
    func stopAdvertising() async {
        let publishers = self.state.withLock { state in
            state.isShuttingDown = true
            defer { state.publishers = [] }
            return state.publishers
        }
        for publisher in publishers { await publisher.stop() }
    }

    /// What the TXT record and the instance name say of the accessory: its `GET /status`
    /// document's `model`, `serialNumber` and `manufacturer`, when it answers one within 3 s.
    private struct Identity {
        var model: String?
        var serial: String?
        var manufacturer: String?

        var instanceName: String? {
            guard let model else { return nil }
            return self.serial.map { "\(model) \($0)" } ?? model
        }

        var txt: [String] {
            [("model", self.model), ("serial", self.serial), ("manufacturer", self.manufacturer)]
                .compactMap { key, value in value.map { "\(key)=\($0)" } }
        }
    }

    private func accessoryIdentity() async -> Identity {
        let request = AccessoryRequest(path: "/status", timeout: .seconds(3))
        guard let (head, body) = try? await self.client.data(request, maxBodySize: 64 * 1024), head.status == .ok,
            let object = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
        else {
            return Identity()
        }
        // The device wrote these: printable ASCII only, and short enough for a TXT entry.
        func text(_ key: String) -> String? {
            guard let value = object[key] as? String else { return nil }
            let clean = String(value.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7f }.prefix(200))
            return clean.isEmpty ? nil : clean
        }
        return Identity(model: text("model"), serial: text("serialNumber"), manufacturer: text("manufacturer"))
    }

    /// `name` if it is a path to an executable, else the first executable of that name on `PATH`.
    static func executable(_ name: String) -> String? {
        if name.contains("/") { return access(name, X_OK) == 0 ? name : nil }
        let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in path.split(separator: ":") where !directory.isEmpty {
            let candidate = "\(directory)/\(name)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }
}
