import AccessoryClient
import AccessoryTLS
import AccessoryTransport
import Foundation
import NIOPosix
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The accessories ``AccessoryURLProtocol`` serves, process-wide.
///
/// URLSession creates protocol objects from a class, so the routes cannot belong to one session:
/// every session whose configuration lists ``AccessoryURLProtocol`` sees the same table. One
/// ``AccessoryClient`` (one link) is made per route, on first use, and shared by all sessions;
/// its requests queue on the link in FIFO order.
public final class AccessoryRouteTable: Sendable {
    /// The table ``AccessoryURLProtocol`` reads.
    public static let shared = AccessoryRouteTable()

    private struct State {
        var routes: [String: AccessoryRoute] = [:]
        var httpHosts: [String: String] = [:]
        var clients: [String: AccessoryClient] = [:]
        var cache: AccessoryResponseCache? = AccessoryResponseCache()
    }

    private let state = TrackedMutex(State())

    /// Creates an empty table (``shared`` is the one the protocol uses; others are for tests).
    public init() {}

    /// Adds `route`, replacing a route with the same name (whose link is then shut down).
    public func add(_ route: AccessoryRoute) {
        let replaced: AccessoryClient? = self.state.withLock { state in
            if let old = state.routes[route.name] {
                for host in old.httpHosts where state.httpHosts[host] == old.name { state.httpHosts[host] = nil }
            }
            state.routes[route.name] = route
            for host in route.httpHosts { state.httpHosts[host] = route.name }
            return state.clients.removeValue(forKey: route.name)
        }
        if let replaced { Task { await replaced.shutdown() } }
    }

    /// Removes the route named `name` and shuts its link down.
    public func remove(_ name: String) async {
        let client: AccessoryClient? = self.state.withLock { state in
            let key = name.lowercased()
            if let old = state.routes.removeValue(forKey: key) {
                for host in old.httpHosts where state.httpHosts[host] == key { state.httpHosts[host] = nil }
            }
            return state.clients.removeValue(forKey: key)
        }
        await client?.shutdown()
    }

    /// The configured routes.
    public var routes: [AccessoryRoute] {
        self.state.withLock { Array($0.routes.values) }
    }

    /// Where responses of accessory routes are cached (in memory, 16 MiB, by default); `nil`
    /// disables caching.
    ///
    /// The session's own `urlCache` is not used: with a custom protocol, FoundationNetworking
    /// on Linux never stores anything in it and crashes on cancellation races while it is set,
    /// so `URLSessionConfiguration.registerAccessoryProtocol()` sets it to `nil`.
    public var cache: AccessoryResponseCache? {
        get { self.state.withLock { $0.cache } }
        set { self.state.withLock { $0.cache = newValue } }
    }

    /// The route that serves `url`, if any: `accessory://NAME/…`, `accessorys://NAME/…`, or
    /// `http://HOST/…` for a host a route lists.
    public func route(for url: URL) -> AccessoryRoute? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
        return self.state.withLock { state in
            switch scheme {
            case AccessoryURLProtocol.scheme, AccessoryURLProtocol.secureScheme:
                return state.routes[host]
            case "http":
                return state.httpHosts[host].flatMap { state.routes[$0] }
            default:
                return nil
            }
        }
    }

    /// The client of the route named `name`, made on first use.
    func client(for route: AccessoryRoute) throws(AccessoryURLProtocolError) -> AccessoryClient {
        let existing = self.state.withLock { $0.clients[route.name] }
        if let existing { return existing }
        var transport: any ByteStreamTransport
        switch route.endpoint {
        case .transport(let given):
            transport = given
        case .device(let spec):
            do {
                transport = try route.resolver.transport(for: spec)
            } catch {
                throw AccessoryURLProtocolError(
                    .routeUnavailable,
                    "accessory \(route.name) (\(spec)) cannot be opened: \(error)"
                )
            }
        }
        if var tls = route.tls {
            if tls.applicationProtocols.isEmpty, case .device(let spec) = route.endpoint {
                tls.applicationProtocols = spec.link.http == .http2 ? ["h2"] : ["http/1.1"]
            }
            transport = TLSTransport(wrapping: transport, configuration: tls)
        }
        var configuration = route.clientConfiguration
        if case .device(let spec) = route.endpoint, spec.link.http == .http2 {
            // http=2: the route's concurrent tasks run as concurrent streams.
            configuration.link.httpVersion = .http2
        }
        return self.state.withLock { state in
            if let raced = state.clients[route.name] { return raced }
            let client = AccessoryClient(transport: transport, configuration: configuration)
            state.clients[route.name] = client
            return client
        }
    }
}
