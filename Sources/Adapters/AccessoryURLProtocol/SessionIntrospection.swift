import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a protocol object needs to know about its task's session, which FoundationNetworking
/// does not expose: the configuration (for `httpAdditionalHeaders` and the timeouts) and
/// whether the task reports through a completion handler or through the session's delegate.
///
/// Read by reflection of swift-corelibs-foundation's internal stored properties
/// (`URLSessionTask.session`, `URLSession.taskRegistry.behaviours`). Every step is optional:
/// when a Foundation release renames them, the answers become `nil` and the protocol falls
/// back to its safe defaults (whole-body delivery, request timeout only, no additional
/// headers). The test suite asserts that the reflection still works on the toolchain in use.
///
/// Must be called on the task's work queue (inside `startLoading`), where the session's task
/// registry may be read.
enum SessionIntrospection {
    /// How a task hands its result to the application.
    enum Delivery: Equatable {
        /// Through the session's data delegate: every `didLoad` chunk reaches it (streaming).
        case delegate
        /// Through a completion handler (`dataTask(with:completionHandler:)`, `data(for:)`):
        /// only the last `didLoad` chunk survives, so the body must be delivered in one piece.
        case completionHandler
    }

    /// The session that owns `task`, found through the task's stored `session` property.
    static func session(of task: URLSessionTask) -> URLSession? {
        Self.storedProperty("session", of: task).flatMap { $0 as? URLSession }
    }

    /// How `task` delivers its body, or `nil` when it cannot be told.
    static func delivery(of task: URLSessionTask, in session: URLSession) -> Delivery? {
        guard let registry = Self.storedProperty("taskRegistry", of: session),
            let behaviours = Self.storedProperty("behaviours", of: registry)
        else { return nil }
        for entry in Mirror(reflecting: behaviours).children {
            let pair = Array(Mirror(reflecting: entry.value).children)
            guard pair.count == 2, let identifier = pair[0].value as? Int, identifier == task.taskIdentifier else {
                continue
            }
            let behaviour = String(describing: pair[1].value)
            if behaviour.hasPrefix("callDelegate") {
                return session.delegate is URLSessionDataDelegate ? .delegate : .completionHandler
            }
            if behaviour.hasPrefix("dataCompletionHandler") || behaviour.hasPrefix("downloadCompletionHandler") {
                return .completionHandler
            }
            return nil
        }
        return nil
    }

    private static func storedProperty(_ name: String, of object: Any) -> Any? {
        var mirror: Mirror? = Mirror(reflecting: object)
        while let current = mirror {
            for child in current.children where child.label == name {
                return Self.unwrapped(child.value)
            }
            mirror = current.superclassMirror
        }
        return nil
    }

    /// Unwraps an `Optional` (or implicitly unwrapped optional) stored property.
    private static func unwrapped(_ value: Any) -> Any? {
        let mirror = Mirror(reflecting: value)
        guard mirror.displayStyle == .optional else { return value }
        return mirror.children.first.map { $0.value }
    }
}
