import AccessoryResponder
import AccessoryTransport
import NIOCore

/// A realistic accessory in software: an httpbin-like set of endpoints served over any byte
/// stream pair, for demos and tests without hardware.
///
/// Endpoints: `GET /status`, `/echo`, `/bytes/N`, `/stream/N`, `/redirect/N`,
/// `/absolute-redirect/N`, `/redirect-to?url=…&status=…`, `/basic-auth/USER/PASS`,
/// `/digest-auth/QOP/USER/PASS[/ALGORITHM]`, `/delay/SECONDS`, `/etag`, `POST|PUT /upload`.
public struct EmulatedAccessory: Sendable {
    /// What the accessory says it is (`GET /status`).
    public var identity: Identity
    /// When the accessory "powered on"; `uptimeSeconds` counts from here.
    public var startTime: ContinuousClock.Instant

    /// Creates an emulated accessory.
    public init(identity: Identity = .init(), startTime: ContinuousClock.Instant = .now) {
        self.identity = identity
        self.startTime = startTime
    }

    /// The accessory's request handler, to serve with any `HTTPResponder` (AccessoryResponder).
    public var handler: HTTPHandler {
        let router = EmulatorRouter(identity: self.identity, startTime: self.startTime)
        return { request in try await router.respond(to: request) }
    }

    /// A responder that serves this accessory.
    public func makeResponder(configuration: ResponderConfiguration = .init()) -> HTTPResponder {
        HTTPResponder(configuration: configuration, handler: self.handler)
    }

    /// A transport whose every `open` serves a fresh session of this accessory on the peer end
    /// of a new socketpair, in a background task on `group`. The session ends when the client
    /// closes its end.
    public func socketPairTransport(
        on group: any EventLoopGroup,
        configuration: ResponderConfiguration = .init(),
        opensIndependentStreams: Bool = true
    ) -> SocketPairTransport {
        let responder = self.makeResponder(configuration: configuration)
        return SocketPairTransport(
            name: "emulator:\(self.identity.model)",
            opensIndependentStreams: opensIndependentStreams
        ) { descriptor in
            let eventLoop = group.next()
            Task {
                // A descriptor that cannot be served is closed by `serve`; the client sees EOF.
                try? await responder.serve(descriptor: descriptor, on: eventLoop)
            }
        }
    }
}
