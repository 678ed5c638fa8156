/// Why a redirect was not followed: the `underlying` value of an `AccessoryClientError` with
/// code ``AccessoryClientError/Code/redirectFailed`` (see ``AccessoryClientError/redirectFailure``).
public enum RedirectFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The chain grew past ``RedirectPolicy/maxRedirects``.
    case tooManyRedirects(limit: Int)
    /// The target (method and URL) was already visited in this chain.
    case cycle(url: String)
    /// The target is another accessory and ``RedirectPolicy/allowCrossAccessory`` is off.
    case crossAccessoryRefused(location: String)
    /// The `Location` value cannot be resolved into a usable request target.
    case invalidLocation(String)

    public var description: String {
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
