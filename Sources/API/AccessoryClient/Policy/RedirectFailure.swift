/// Why a redirect was not followed. The client maps it into its public error.
package enum RedirectFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The chain grew past ``RedirectPolicy/maxRedirects``.
    case tooManyRedirects(limit: Int)
    /// The target (method and URL) was already visited in this chain.
    case cycle(url: String)
    /// The target is another accessory and ``RedirectPolicy/allowCrossAccessory`` is off.
    case crossAccessoryRefused(location: String)
    /// The `Location` value cannot be resolved into a usable request target.
    case invalidLocation(String)

    package var description: String {
        switch self {
        case .tooManyRedirects(let limit):
            return "too many redirects (limit \(limit))"
        case .cycle(let url):
            return "redirect cycle detected at \(url)"
        case .crossAccessoryRefused(let location):
            return "redirect to another accessory refused: \(location)"
        case .invalidLocation(let location):
            return "invalid redirect Location: \(location)"
        }
    }
}
