import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#endif

/// Who is on the other end of a client connection, for the log: the process, user and group
/// of a unix socket's peer (`SO_PEERCRED`), or a TCP peer's address.
enum PeerIdentity {
    static func describe(_ channel: any Channel) async -> String {
        if let address = channel.remoteAddress, case .v4 = address {
            return "\(address.ipAddress ?? "?"):\(address.port ?? 0)"
        }
        if let address = channel.remoteAddress, case .v6 = address {
            return "[\(address.ipAddress ?? "?")]:\(address.port ?? 0)"
        }
        guard let provider = channel as? any SocketOptionProvider else { return "a unix socket peer" }
        let future: EventLoopFuture<PeerCredentials> = provider.unsafeGetSocketOption(
            level: .init(rawValue: SOL_SOCKET),
            name: .init(rawValue: SO_PEERCRED)
        )
        guard let credentials = try? await future.get() else { return "a unix socket peer" }
        return "pid \(credentials.pid) uid \(credentials.uid) gid \(credentials.gid)"
    }
}

/// `struct ucred` of `<sys/socket.h>` (hidden from Swift behind `_GNU_SOURCE`): the same three
/// 32-bit fields, so `getsockopt(SO_PEERCRED)` fills it.
struct PeerCredentials {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}
