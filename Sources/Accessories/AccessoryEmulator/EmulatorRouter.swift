import AccessoryResponder
import HTTPTypes

/// Dispatches a request to the endpoint its path names, checking the method first.
struct EmulatorRouter: Sendable {
    let identity: EmulatedAccessory.Identity
    let startTime: ContinuousClock.Instant

    private static let readOnly: [HTTPRequest.Method] = [.get, .head]

    func respond(to request: ResponderRequest) async throws -> ResponderResponse {
        let target = request.head.path ?? "/"
        // Substrings, not Strings: routing a request allocates as little as possible.
        let path = target.firstIndex(of: "?").map { target[..<$0] } ?? target[...]
        let segments = path.split(separator: "/", omittingEmptySubsequences: true)
        let method = request.head.method
        guard let first = segments.first else { return EmulatorResponses.notFound(String(path)) }

        func allow(_ methods: [HTTPRequest.Method]) -> ResponderResponse? {
            methods.contains(method) ? nil : EmulatorResponses.methodNotAllowed(methods)
        }

        switch (first, segments.count) {
        case ("status", 1):
            return allow(Self.readOnly) ?? StatusEndpoint.respond(identity: self.identity, startTime: self.startTime)
        case ("echo", 1):
            return try await EchoEndpoint.respond(to: request)
        case ("bytes", 2):
            return allow(Self.readOnly) ?? BytesEndpoint.respond(count: String(segments[1]), chunked: false)
        case ("stream", 2):
            return allow(Self.readOnly) ?? BytesEndpoint.respond(count: String(segments[1]), chunked: true)
        case ("redirect", 2):
            return RedirectEndpoint.relative(count: String(segments[1]))
        case ("absolute-redirect", 2):
            return RedirectEndpoint.absolute(count: String(segments[1]), host: request.head.authority)
        case ("redirect-to", 1):
            return RedirectEndpoint.redirectTo(target: target)
        case ("basic-auth", 3):
            return allow(Self.readOnly)
                ?? BasicAuthEndpoint.respond(to: request.head, user: String(segments[1]), password: String(segments[2]))
        case ("digest-auth", 4), ("digest-auth", 5):
            return allow(Self.readOnly)
                ?? DigestAuthEndpoint.respond(
                    to: request.head,
                    qop: String(segments[1]),
                    user: String(segments[2]),
                    password: String(segments[3]),
                    algorithm: segments.count == 5 ? String(segments[4]) : "MD5"
                )
        case ("delay", 2):
            return try await DelayEndpoint.respond(seconds: String(segments[1]))
        case ("etag", 1):
            return allow(Self.readOnly) ?? ETagEndpoint.respond(to: request.head)
        case ("trailers", 1):
            return try await TrailersEndpoint.respond(to: request)
        case ("upload", 1):
            if let refusal = allow([.post, .put]) { return refusal }
            return try await UploadEndpoint.respond(to: request)
        default:
            return EmulatorResponses.notFound(String(path))
        }
    }
}
