import AccessoryClient
import AccessoryHTTP1
import AccessoryResponder
import AccessoryTransport
import NIOPosix

/// A client speaking HTTP/2 to `responder`, which serves each open of the link on its own
/// socketpair in this process; `configure` adjusts the link (timeouts, decompression).
func http2Client(
    of responder: HTTPResponder,
    name: String,
    configure: (inout LinkConfiguration) -> Void = { _ in }
) -> AccessoryClient {
    let group = MultiThreadedEventLoopGroup.singleton
    let transport = SocketPairTransport(name: name) { descriptor in
        let eventLoop = group.next()
        Task { try? await responder.serve(descriptor: descriptor, on: eventLoop) }
    }
    var configuration = AccessoryClient.Configuration()
    configuration.link.httpVersion = .http2
    configure(&configuration.link)
    return AccessoryClient(transport: transport, configuration: configuration)
}
