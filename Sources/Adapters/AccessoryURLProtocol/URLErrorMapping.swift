import AccessoryClient
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Turns a failure of the exchange into what URLSession callers expect: a `URLError` with the
/// closest code, the client's message as its description and the original error underneath.
/// ``AccessoryURLProtocolError``s pass unchanged.
enum URLErrorMapping {
    static func urlError(for error: any Error, url: URL) -> any Error {
        if let error = error as? AccessoryURLProtocolError { return error }
        if let error = error as? URLError { return error }
        let clientError = AccessoryClientError.wrapping(error)
        if let inner = clientError.underlying as? AccessoryURLProtocolError { return inner }
        let code: URLError.Code
        switch clientError.code {
        case .timedOut: code = .timedOut
        case .cancelled: code = .cancelled
        case .transportFailed, .shutDown: code = .networkConnectionLost
        case .protocolError: code = .badServerResponse
        case .redirectFailed:
            let message = clientError.message.lowercased()
            code =
                message.contains("limit") || message.contains("too many") || message.contains("cycle")
                ? .httpTooManyRedirects : .redirectToNonExistentLocation
        case .responseTooLarge: code = .dataLengthExceedsMaximum
        case .invalidRequest: code = .badURL
        case .requestBodyFailed: code = .requestBodyStreamExhausted
        case .fileError: code = .cannotOpenFile
        default: code = .unknown
        }
        return URLError(
            code,
            userInfo: [
                NSLocalizedDescriptionKey: clientError.message,
                NSUnderlyingErrorKey: clientError as NSError,
                NSURLErrorFailingURLErrorKey: url,
            ]
        )
    }

    static func timedOut(_ url: URL, _ message: String) -> URLError {
        URLError(
            .timedOut,
            userInfo: [
                NSLocalizedDescriptionKey: message,
                NSURLErrorFailingURLErrorKey: url,
            ]
        )
    }
}
