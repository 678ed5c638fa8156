import AccessoryTransport

/// The HTTP version a test's link speaks: a test argument that Swift Testing shows by its
/// description.
public enum HTTPVersionChoice: String, CustomStringConvertible, Sendable, CaseIterable {
    case http1 = "HTTP/1.1"
    case http2 = "HTTP/2"

    public var description: String { self.rawValue }

    /// The link option that asks for this version.
    public var version: LinkOptions.HTTPVersion {
        switch self {
        case .http1: .http1_1
        case .http2: .http2
        }
    }
}
