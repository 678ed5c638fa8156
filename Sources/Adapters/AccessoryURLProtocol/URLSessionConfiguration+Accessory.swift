import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Setting up a URLSession configuration to serve accessory routes through
/// ``AccessoryURLProtocol``.
extension URLSessionConfiguration {
    /// A default configuration that serves `routes` through ``AccessoryURLProtocol``.
    ///
    /// The routes are added to ``AccessoryRouteTable/shared`` (replacing routes of the same name).
    public static func accessory(_ routes: [AccessoryRoute]) -> URLSessionConfiguration {
        for route in routes { AccessoryRouteTable.shared.add(route) }
        let configuration = URLSessionConfiguration.default
        configuration.registerAccessoryProtocol()
        return configuration
    }

    /// Puts ``AccessoryURLProtocol`` first in `protocolClasses` (so it also wins `http://`
    /// hosts mapped to accessories) and sets `urlCache` to `nil`.
    ///
    /// `urlCache` is cleared because FoundationNetworking on Linux never stores a custom
    /// protocol's responses in it and crashes in cancellation races while it is set; accessory
    /// responses are cached in ``AccessoryRouteTable/cache`` instead. Other requests made with
    /// this configuration are then not cached.
    public func registerAccessoryProtocol() {
        let others = (self.protocolClasses ?? []).filter { $0 != AccessoryURLProtocol.self }
        self.protocolClasses = [AccessoryURLProtocol.self] + others
        self.urlCache = nil
    }
}
