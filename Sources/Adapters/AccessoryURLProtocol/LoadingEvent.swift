import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Something the protocol must tell its client, produced off the work queue and delivered on it.
enum LoadingEvent {
    case response(HTTPURLResponse)
    case data(Data)
    case finished
    case failed(any Error)

    var isTerminal: Bool {
        switch self {
        case .finished, .failed: return true
        case .response, .data: return false
        }
    }
}
