import AccessoryClient
import AccessoryTLS
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
            switch clientError.redirectFailure {
            case .tooManyRedirects, .cycle: code = .httpTooManyRedirects
            case .crossAccessoryRefused, .invalidLocation, nil: code = .redirectToNonExistentLocation
            }
        case .tlsUntrusted, .tlsFailed, .tlsConfiguration:
            code = Self.code(for: clientError.tlsError)
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

extension URLErrorMapping {
    /// The codes URLSession uses for the same TLS failures (NSURLErrorDomain -1200…-1206).
    static func code(for tls: TLSError?) -> URLError.Code {
        switch tls?.code {
        case .untrustedCertificate?, .nameMismatch?, .pinMismatch?, .pairingMismatch?, .noIdentity?:
            return .serverCertificateUntrusted
        case .clientCertificateRequired?:
            return .clientCertificateRequired
        case .certificateRejectedByPeer?:
            return .clientCertificateRejected
        default:
            return .secureConnectionFailed
        }
    }
}
