import AccessoryClient
import AccessoryTransport
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Serves one accessory as ordinary local HTTP: every HTTP/1.1 client on the machine (curl,
/// Python, a browser, URLSession with a plain `http://` URL) reaches the accessory through the
/// bridge's listeners, and the bridge carries each request over the accessory's link with the
/// native client, one at a time on an HTTP/1.1 link (queued in arrival order), at once on an
/// HTTP/2 one.
///
/// ```swift
/// let bridge = AccessoryBridge(client: AccessoryClient(transport: transport))
/// let bound = try await bridge.bind([.unix(path: "/run/accessory-http/accessory.sock")])
/// await bridge.run()  // until bridge.shutdown()
/// ```
///
/// Redirects and authentication challenges from the accessory pass through unchanged (the
/// client decides); hop-by-hop fields are dropped both ways (RFC 9110 §7.6.1); absolute-form
/// targets and CONNECT are refused. An accessory that cannot be reached is answered 502, one
/// too slow to start its answer 504, a queue longer than ``Configuration/queueTimeout`` 503
/// with `Retry-After`. `GET /.well-known/accessory-http/status` on any listener returns the
/// bridge's counts as JSON.
public final class AccessoryBridge: Sendable {
    /// How the bridge serves its accessory.
    public struct Configuration: Sendable {
        /// The accessory's name, in messages and the status document.
        public var name = "accessory"
        /// The device spec the client's link uses, for the status document.
        public var device = ""
        /// The longest a request waits for its turn on the link before it is answered 503.
        public var queueTimeout: Duration = .seconds(30)
        /// The longest the accessory may take to start its answer before it is answered 504:
        /// counted from the last part of the request's body the link took (from the start of the
        /// body, once the link is open and has sent the head; from the exchange's start for a
        /// request without one), so a long upload is not cut.
        public var responseTimeout: Duration = .seconds(60)
        /// The `Retry-After` of a 503, in seconds.
        public var retryAfterSeconds = 2
        /// Exchanges carried at once. `nil` (the default) follows the links: per link, 1 on
        /// HTTP/1.1, where exchanges take turns anyway, and 100 on HTTP/2, whose streams run at
        /// once (100 is the concurrent-stream limit RFC 9113 recommends a peer allow at least).
        public var maxConcurrentExchanges: Int? = nil
        /// Allow TCP listeners on addresses other than loopback (anyone who can reach the
        /// address can then use the accessory).
        public var allowRemote = false
        /// The mode given to unix socket files (connecting needs write permission).
        public var socketMode: mode_t = 0o660
        /// The group given to unix socket files; `nil` leaves the group they were created with.
        public var socketGroup: gid_t?
        /// How long a client connection may stay silent, or leave a request head unfinished,
        /// before it is answered 408 and closed (never while an exchange runs on it).
        public var clientIdleTimeout: Duration = .seconds(60)
        /// How long shutdown waits for exchanges under way before it closes their connections.
        public var gracePeriod: Duration = .seconds(10)
        /// After this long without a request, the link's byte stream is closed, which releases
        /// the device (a serial port unlocked, USB interfaces released) for another program;
        /// the next request opens it again (`--idle-release`, ChromeOS ippusb_bridge's claim on
        /// demand). `nil`: the device is held while the bridge runs.
        public var idleRelease: Duration?
        /// DNS-SD advertisement of the TCP listeners (off by default).
        public var dnsSD = DNSSDConfiguration()

        /// A configuration with the defaults: the name "accessory", no device spec, a queue timeout of
        /// 30 s, a response timeout of 60 s, `Retry-After: 2`, one exchange at a time, loopback
        /// listeners only, socket files of mode 0660 in the group they were created with, a client idle
        /// timeout of 60 s, a grace period of 10 s, the device held while the bridge runs, and no
        /// DNS-SD advertisement.
        public init() {}
    }

    struct State {
        var servers: [NIOAsyncChannel<BridgeChannel, Never>] = []
        var socketPaths: [String] = []
        /// The TCP listeners as bound, for DNS-SD.
        var boundTCP: [(host: String, port: Int)] = []
        /// The running DNS-SD publishers.
        var publishers: [HelperProcess] = []
        var isShuttingDown = false
        /// `run()` is serving `servers[..<served]` (it serves those bound before it began).
        var running = false
        var served = 0
    }

    /// How the bridge serves its accessory, as given to ``init(client:configuration:logger:eventLoopGroup:)``.
    public let configuration: Configuration
    /// The links' clients (one per link).
    let pool: BridgeClientPool
    /// The first link's client.
    var client: AccessoryClient { self.pool.first }
    let logger: Logger
    let eventLoopGroup: any EventLoopGroup
    private let admission: BridgeAdmission
    private let statistics = BridgeStatistics()
    private let tracker = ConnectionTracker()
    let unclaimed = UnclaimedConnections()
    let state = TrackedMutex(State())

    /// A bridge that carries requests over `client`'s link. It listens nowhere until ``bind(_:)``.
    ///
    /// - Parameters:
    ///   - client: The client of the accessory's link; every request goes through it.
    ///   - configuration: How the bridge serves its accessory; the defaults of
    ///     ``Configuration/init()`` unless given.
    ///   - logger: Where connections, exchanges and errors are logged; by default a logger labelled
    ///     `accessory-http.bridge`.
    ///   - eventLoopGroup: The event loops the listeners and client connections run on; NIO's
    ///     `MultiThreadedEventLoopGroup.singleton` by default.
    public convenience init(
        client: AccessoryClient,
        configuration: Configuration = .init(),
        logger: Logger = Logger(label: "accessory-http.bridge"),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.init(pool: [client], configuration: configuration, logger: logger, eventLoopGroup: eventLoopGroup)
    }

    /// A bridge that carries requests over several links to one accessory, each through its own
    /// client: a USB device with several qualifying interfaces serves one link per interface
    /// (`DeviceResolver.concurrentLinks(for:)` in AccessoryDevices counts them), so that many
    /// exchanges run at once on HTTP/1.1. Each exchange takes the least busy link.
    ///
    /// - Parameters:
    ///   - clients: One client per link, at least one; an empty array is taken as a mistake
    ///     and fails every request with 502.
    ///   - configuration: How the bridge serves its accessory.
    ///   - logger: Where connections, exchanges and errors are logged.
    ///   - eventLoopGroup: The event loops the listeners and client connections run on.
    public convenience init(
        clients: [AccessoryClient],
        configuration: Configuration = .init(),
        logger: Logger = Logger(label: "accessory-http.bridge"),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.init(pool: clients, configuration: configuration, logger: logger, eventLoopGroup: eventLoopGroup)
    }

    private init(
        pool clients: [AccessoryClient],
        configuration: Configuration,
        logger: Logger,
        eventLoopGroup: any EventLoopGroup
    ) {
        self.pool = BridgeClientPool(clients)
        self.configuration = configuration
        self.logger = logger
        self.eventLoopGroup = eventLoopGroup
        // Each link carries one exchange at a time on HTTP/1.1 and up to 100 on HTTP/2.
        let perLink = clients.first?.configuration.link.httpVersion == .http2 ? 100 : 1
        self.admission = BridgeAdmission(limit: configuration.maxConcurrentExchanges ?? perLink * max(1, clients.count))
    }

    /// What the bridge has done so far, and the link's state.
    public var status: BridgeStatus {
        let load = self.admission.load
        var status = BridgeStatus(
            name: self.configuration.name,
            device: self.configuration.device,
            links: self.pool.clients.count,
            linkOpens: self.pool.clients.reduce(0) { $0 + ($1.http2?.openCount ?? $1.link.openCount) },
            linkRenewals: self.pool.clients.reduce(0) { $0 + ($1.http2?.renewalCount ?? $1.link.renewalCount) },
            requests: 0,
            active: load.active,
            queued: load.queued,
            bytesToAccessory: 0,
            bytesFromAccessory: 0,
            errors: [:]
        )
        self.statistics.snapshot(into: &status)
        return status
    }

    /// Client connections open now.
    public var connectionCount: Int { self.tracker.count }

    /// Serves the bound listeners until ``shutdown()``; returns once every connection ended.
    /// Call it once; it returns at once if the bridge is already serving or shutting down.
    public func run() async {
        let servers = self.state.withLock { state -> [NIOAsyncChannel<BridgeChannel, Never>]? in
            guard !state.running, !state.isShuttingDown else { return nil }
            state.running = true
            state.served = state.servers.count
            return state.servers
        }
        guard let servers else { return }
        let releaser = self.configuration.idleRelease.map { idle in
            Task { await self.releaseWhenIdle(after: idle) }
        }
        defer { releaser?.cancel() }
        let advertiser = self.configuration.dnsSD.mode == .off ? nil : Task { await self.advertise() }
        defer { advertiser?.cancel() }
        await withDiscardingTaskGroup { group in
            for server in servers {
                group.addTask {
                    try? await server.executeThenClose { inbound in
                        try await withThrowingDiscardingTaskGroup { connections in
                            for try await connection in inbound {
                                self.unclaimed.claim(connection)
                                connections.addTask { await self.serve(connection) }
                            }
                        }
                    }
                }
            }
        }
        // Connections the listeners accepted as they closed, never handed to the loop above.
        await self.unclaimed.closeAll()
    }

    /// Releases the device each time the link has been idle for `idle` (see
    /// ``Configuration/idleRelease``); requests that arrive meanwhile wait for the release to end.
    private func releaseWhenIdle(after idle: Duration) async {
        // The quiet spell already dealt with: the loop then sleeps a whole `idle` at a time
        // until a request starts another, instead of waking every few milliseconds.
        var handled: ContinuousClock.Instant?
        while !Task.isCancelled {
            let since = self.admission.idleSince
            let wait = since.map { $0 == handled ? idle : idle - $0.duration(to: .now) } ?? idle
            guard (try? await Task.sleep(for: max(.milliseconds(50), wait))) != nil else { return }
            guard let quiet = self.admission.idleSince, quiet != handled, quiet.duration(to: .now) >= idle,
                self.admission.closeIfIdle()
            else { continue }
            var released = false
            for client in self.pool.clients where await client.releaseTransport() { released = true }
            self.admission.reopen()
            handled = self.admission.idleSince
            if released {
                self.statistics.releasedIdle()
                self.logger.info("released \(self.configuration.device) after \(idle) without a request")
            }
        }
    }

    private func serve(_ channel: BridgeChannel) async {
        guard let id = self.tracker.add(channel.channel) else {
            try? await channel.executeThenClose { _, _ in }  // dropped unended, it would trap
            return
        }
        defer { self.tracker.remove(id) }
        let peer = await PeerIdentity.describe(channel.channel)
        self.logger.debug("connection from \(peer)")
        let forwarder = BridgeForwarder(
            pool: self.pool,
            configuration: self.configuration,
            admission: self.admission,
            statistics: self.statistics,
            logger: self.logger,
            status: { self.status }
        )
        await BridgeConnection(forwarder: forwarder, peer: peer, tracker: self.tracker, id: id).run(channel)
    }

    /// Stops accepting, lets exchanges under way finish for up to the grace period, then
    /// closes every connection and removes the socket files; ``run()`` returns after it.
    public func shutdown() async {
        let (servers, paths, unserved, running) = self.state.withLock { state in
            state.isShuttingDown = true
            let unserved = state.servers[min(state.served, state.servers.count)...]
            return (state.servers, state.socketPaths, Array(unserved), state.running)
        }
        await self.stopAdvertising()
        for path in paths { _ = unlink(path) }
        for server in servers { try? await server.channel.close() }
        // Listeners run() never served end here, as run() ends its own (executeThenClose), and
        // so do the connections they accepted, when run() is not there to end them.
        for server in unserved { try? await server.executeThenClose { _ in } }
        if !running { await self.unclaimed.closeAll() }
        self.tracker.drain()
        let deadline = ContinuousClock.now + self.configuration.gracePeriod
        while self.tracker.count > 0 && ContinuousClock.now < deadline {
            await sleepUncancelled(for: .milliseconds(20))  // a cancelled caller still gets its grace
        }
        self.tracker.closeAll()
    }
}
