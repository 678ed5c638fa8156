import AccessoryEmulator
import AccessoryTLS
import AccessoryTestSupport
import AccessoryTransport

#if canImport(Glibc)
    import Glibc
#endif

/// Runs our responder over TLS on one end of a socketpair that stays open across the host's
/// opens (as a serial line does), and `body` with the host's end and the trust that accepts the
/// responder's certificate. The responder recognises a new session on the line by itself.
func withTLSResponderOnASharedLine(
    _ certificates: Certificates,
    _ body: (_ host: CInt, _ trust: TLSTrust) async throws -> Void
) async throws {
    let (host, device) = try SocketPairTransport.makeSocketPair()
    defer {
        close(host)
        close(device)
    }
    let server = try TLSServerContext(
        configuration: .server(
            identity: .pem(
                certificateFile: certificates.path("server.pem"),
                keyFile: certificates.path("server.key")
            )
        )
    )
    let responder = EmulatedAccessory().makeResponder()
    let serving = Task {
        try await responder.serve(transport: SharedLineEnd(descriptor: device)) { channel in
            [try server.addHandler(to: channel)]
        }
    }
    defer { serving.cancel() }
    try await body(host, TLSTrust(useSystemRoots: false, anchorFiles: [certificates.path("ca.pem")], trustStore: nil))
}
