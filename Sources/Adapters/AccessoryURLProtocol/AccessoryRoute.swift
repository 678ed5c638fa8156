import AccessoryClient
import AccessoryDevices
import AccessoryTLS
import AccessoryTransport

/// One accessory reachable through URLSession: `accessory://NAME/…` (and, optionally,
/// `http://HOST/…` for the hosts listed in ``httpHosts``) is carried over its link.
///
/// ```swift
/// let route = AccessoryRoute(name: "thermostat", device: try DeviceSpec(parsing: "serial:/dev/ttyACM0"))
/// let session = URLSession(configuration: .accessory([route]))
/// let (data, _) = try await session.data(from: URL(string: "accessory://thermostat/status")!)
/// ```
public struct AccessoryRoute: Sendable {
    /// Where the accessory is.
    public enum Endpoint: Sendable {
        /// An already-built byte stream transport (a socketpair, an emulator, a custom transport).
        case transport(any ByteStreamTransport)
        /// A device spec of any kind (`emulator`, `unix:`, `exec:`, `serial:`, `usb:`), resolved
        /// by ``AccessoryRoute/resolver`` when the route is first used.
        case device(DeviceSpec)
    }

    /// The accessory's name: the host of `accessory://NAME/…`, compared case-insensitively.
    public var name: String
    /// Where the accessory is.
    public var endpoint: Endpoint
    /// `http://HOST/…` URLs whose host is listed here (case-insensitively) are also carried to
    /// this accessory instead of the network. Empty by default.
    public var httpHosts: Set<String>
    /// The native client's configuration (link, redirect policy, credential provider, timeouts).
    /// One client, hence one link, is made per route.
    public var clientConfiguration: AccessoryClient.Configuration
    /// TLS over the link, if set: the route's transport is wrapped in a `TLSTransport` with this
    /// configuration (trust, pins, pairing, client identity — see docs/tls.md). A route whose
    /// transport is already a `TLSTransport` is secure too. `accessorys://NAME/…` is refused on
    /// a route that is not secure; on a secure route both schemes go over TLS (one link).
    public var tls: TLSConfiguration?
    /// Resolves a ``Endpoint/device(_:)`` spec into its transport (USB quirks, the event loop
    /// group of the emulator). The default handles every spec kind.
    public var resolver: DeviceResolver = DeviceResolver()
    /// The largest body delivered in one piece to completion-handler and `data(for:)` tasks,
    /// which must receive the whole body at once. Delegate-based tasks stream without a limit.
    public var maxBufferedBodySize: Int

    /// Creates a route to an accessory reached through `transport`.
    public init(
        name: String,
        transport: any ByteStreamTransport,
        httpHosts: Set<String> = [],
        clientConfiguration: AccessoryClient.Configuration = .urlSession,
        tls: TLSConfiguration? = nil,
        maxBufferedBodySize: Int = 64 * 1024 * 1024
    ) {
        self.init(
            name: name,
            endpoint: .transport(transport),
            httpHosts: httpHosts,
            clientConfiguration: clientConfiguration,
            tls: tls,
            maxBufferedBodySize: maxBufferedBodySize
        )
    }

    /// Creates a route to an accessory named by a device spec.
    public init(
        name: String,
        device: DeviceSpec,
        httpHosts: Set<String> = [],
        clientConfiguration: AccessoryClient.Configuration = .urlSession,
        tls: TLSConfiguration? = nil,
        maxBufferedBodySize: Int = 64 * 1024 * 1024
    ) {
        self.init(
            name: name,
            endpoint: .device(device),
            httpHosts: httpHosts,
            clientConfiguration: clientConfiguration,
            tls: tls,
            maxBufferedBodySize: maxBufferedBodySize
        )
    }

    /// Creates a route from its parts.
    public init(
        name: String,
        endpoint: Endpoint,
        httpHosts: Set<String>,
        clientConfiguration: AccessoryClient.Configuration,
        tls: TLSConfiguration?,
        maxBufferedBodySize: Int
    ) {
        self.name = name.lowercased()
        self.endpoint = endpoint
        self.httpHosts = Set(httpHosts.map { $0.lowercased() })
        self.clientConfiguration = clientConfiguration
        self.tls = tls
        self.maxBufferedBodySize = maxBufferedBodySize
    }

    /// Whether the link runs over TLS (``tls`` is set, or the transport is a `TLSTransport`).
    public var isSecure: Bool {
        if self.tls != nil { return true }
        if case .transport(let transport) = self.endpoint { return transport is TLSTransport }
        return false
    }

    /// The credential provider asked when the accessory answers 401 and the URL carries no
    /// user information (a shortcut for `clientConfiguration.credentialProvider`).
    public var credentialProvider: (any CredentialProvider)? {
        get { self.clientConfiguration.credentialProvider }
        set { self.clientConfiguration.credentialProvider = newValue }
    }
}

/// The client configuration a route uses unless given one.
extension AccessoryClient.Configuration {
    /// What a route uses unless given a configuration: as URLSession's own HTTP stack does, it
    /// asks for a compressed body and decodes `gzip` and `deflate`, whether or not the app set
    /// `Accept-Encoding` itself (`LinkConfiguration.decompressResponses`, in AccessoryHTTP1).
    public static var urlSession: AccessoryClient.Configuration {
        var configuration = AccessoryClient.Configuration()
        configuration.link.decompressResponses = true
        return configuration
    }
}
