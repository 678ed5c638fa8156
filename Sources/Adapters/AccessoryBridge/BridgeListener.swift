/// Where the bridge accepts local HTTP clients: `unix:PATH`, `tcp:HOST:PORT` or
/// `tcp:[IPV6]:PORT` (port 0: any free port, reported once bound), or a listening socket it was
/// given (`systemd`: socket activation, ``SystemdSockets``).
public enum BridgeListener: Sendable, Hashable, CustomStringConvertible {
    /// `unix:PATH`: a unix stream socket file at `path`, given
    /// ``AccessoryBridge/Configuration/socketMode`` and ``AccessoryBridge/Configuration/socketGroup``.
    /// A stale socket file left there is replaced; a live one or another kind of file is an error.
    case unix(path: String)
    /// `tcp:HOST:PORT`: a TCP socket on `host`, an IP address or a name such as `localhost`; `port` 0 for
    /// any free port. An address other than loopback needs ``AccessoryBridge/Configuration/allowRemote``.
    case tcp(host: String, port: Int)
    /// A socket already bound and listening, passed by the service manager.
    case inherited(descriptor: CInt)

    /// Parses the `--listen` spelling.
    public init(parsing text: String) throws(BridgeError) {
        if text.hasPrefix("unix:") {
            let path = String(text.dropFirst(5))
            guard !path.isEmpty else {
                throw BridgeError(
                    .invalidListener,
                    "--listen \(text): give the socket's path, e.g. unix:/run/accessory-http/accessory.sock"
                )
            }
            // sockaddr_un holds 107 bytes of path and a terminator.
            guard path.utf8.count <= 107 else {
                throw BridgeError(
                    .invalidListener,
                    "--listen \(text): a unix socket path can be at most 107 bytes long; choose a shorter one"
                )
            }
            self = .unix(path: path)
            return
        }
        guard text.hasPrefix("tcp:") else {
            throw BridgeError(
                .invalidListener,
                "--listen \(text) is not a listener: use unix:PATH, tcp:127.0.0.1:PORT or tcp:[::1]:PORT"
            )
        }
        let rest = text.dropFirst(4)
        let host: Substring
        let portText: Substring
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]"), rest[rest.index(after: close)...].hasPrefix(":") else {
                throw BridgeError(
                    .invalidListener,
                    "--listen \(text): write an IPv6 address in brackets with a port, e.g. tcp:[::1]:8080"
                )
            }
            host = rest[rest.index(after: rest.startIndex)..<close]
            portText = rest[rest.index(close, offsetBy: 2)...]
        } else {
            guard let colon = rest.lastIndex(of: ":") else {
                throw BridgeError(.invalidListener, "--listen \(text): give a port, e.g. tcp:127.0.0.1:8080")
            }
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        }
        guard !host.isEmpty, let port = Int(portText), (0...65535).contains(port) else {
            throw BridgeError(
                .invalidListener,
                "--listen \(text): give an address and a port from 0 to 65535, e.g. tcp:127.0.0.1:8080"
            )
        }
        self = .tcp(host: String(host), port: port)
    }

    /// Whether only this machine can connect: a unix socket, or TCP on a loopback address.
    public var isLocal: Bool {
        switch self {
        case .unix: return true
        case .tcp(let host, _): return host == "localhost" || host == "::1" || host.hasPrefix("127.")
        case .inherited: return true  // where it listens is the socket unit's decision
        }
    }

    public var description: String {
        switch self {
        case .unix(let path): return "unix:\(path)"
        case .tcp(let host, let port): return host.contains(":") ? "tcp:[\(host)]:\(port)" : "tcp:\(host):\(port)"
        case .inherited(let descriptor): return "systemd socket (fd \(descriptor))"
        }
    }
}
