import AccessoryTransport
import HTTPTypes

/// Trailer fields passed from the side that has them to the side that reads them once a body
/// has ended: the link records a response's trailers before it ends the body, so a reader that
/// saw the end finds them; a request body's producer records its own before it returns, and the
/// link sends them with the request's end.
package final class TrailerFields: Sendable {
    private let fields = TrackedMutex<HTTPFields?>(nil)

    package init() {}

    /// The fields recorded so far; `nil` when none were (or all were empty).
    package var value: HTTPFields? { self.fields.withLock { $0 } }

    /// Records `fields` (an empty set is no trailer at all).
    package func record(_ fields: HTTPFields?) {
        guard let fields, !fields.isEmpty else { return }
        self.fields.withLock { $0 = fields }
    }
}
