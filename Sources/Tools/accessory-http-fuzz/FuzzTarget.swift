/// The fuzz targets (docs/testing.md lists what each one asserts beyond "no crash, no hang").
enum FuzzTarget: String, CaseIterable {
    /// The host's response path: bytes from a device through the link's real pipeline.
    case response
    /// The host's HTTP/2 response path: a device's side of the connection against open streams.
    case http2Response = "http2-response"
    /// The responder's request path: bytes from a host through `HTTPResponder`, served for real.
    case request
    /// The session frame reader: frames cut from arbitrary, damaged and split input.
    case sessionReader = "session-reader"
    /// The responder's session machine: plain bytes, HELLO watch, sessions, restarts.
    case sessionResponder = "session-responder"
    /// The opener's session machine: a handshake and a session against arbitrary frames.
    case sessionOpener = "session-opener"
    /// `WWW-Authenticate` and Digest challenge parsing.
    case auth
    /// Device specs, TLS pins and bridge listener addresses.
    case spec
    /// The settings file: keys, sections, values.
    case config
    /// The TLS handler as a client, fed arbitrary bytes as the server's handshake.
    case tlsClient = "tls-client"
    /// The TLS handler as a server, fed arbitrary bytes as the client's handshake.
    case tlsServer = "tls-server"

    func prepare() {
        switch self {
        case .request: RequestPathTarget.prepare()
        case .tlsClient: TLSTarget.prepare(server: false)
        case .tlsServer: TLSTarget.prepare(server: true)
        default: break
        }
    }

    func run(_ input: inout FuzzInput) {
        switch self {
        case .response: ResponsePathTarget.run(&input)
        case .http2Response: HTTP2ResponsePathTarget.run(&input)
        case .request: RequestPathTarget.run(&input)
        case .sessionReader: SessionReaderTarget.run(&input)
        case .sessionResponder: SessionResponderTarget.run(&input)
        case .sessionOpener: SessionOpenerTarget.run(&input)
        case .auth: TextParserTargets.auth(&input)
        case .spec: TextParserTargets.spec(&input)
        case .config: TextParserTargets.config(&input)
        case .tlsClient, .tlsServer: TLSTarget.run(&input)
        }
    }
}
