import AccessoryClient
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A `URLProtocol` that carries URLSession requests to accessories over their links.
///
/// Requests to `accessory://NAME/…` (and to `http://HOST/…` for hosts a route lists) are
/// served by the ``AccessoryRoute`` named NAME in ``AccessoryRouteTable/shared``; every other
/// request is left to the session's normal protocols. Set a session up in one line:
///
/// ```swift
/// let session = URLSession(configuration: .accessory([AccessoryRoute(name: "thermostat", device: spec)]))
/// ```
///
/// On Linux, FoundationNetworking leaves much of the work of a custom protocol undone (see
/// <doc:URLSessionOnLinux>); this class does it itself: whole bodies for completion handlers,
/// streaming for delegates, timeouts, redirects, Basic and Digest authentication, caching,
/// canonical requests, and an immediate, explicit failure for download tasks and
/// `uploadTask(with:from:)` bodies, which cannot work through a custom protocol there.
///
/// Every call to the protocol's client is made on the task's work queue inside
/// `startLoading`; see `LoadingBox` for how events get there.
open class AccessoryURLProtocol: URLProtocol {
    /// `accessory`: plain HTTP over the accessory's link.
    public static let scheme = "accessory"
    /// `accessorys`: HTTP over TLS over the link; the route must be secure (``AccessoryRoute/tls``),
    /// or the request fails with ``AccessoryURLProtocolError/Code/tlsNotConfigured``.
    public static let secureScheme = "accessorys"

    /// The routes served; shared by every session that uses this class.
    public static var routes: AccessoryRouteTable { AccessoryRouteTable.shared }

    private let box = LoadingBox()

    /// Claims requests to configured routes only, and never a request marked as already
    /// handled (the private recursion-guard header).
    open override class func canInit(with request: URLRequest) -> Bool {
        guard let url = request.url else { return false }
        if request.value(forHTTPHeaderField: RequestPlan.handledHeader) != nil { return false }
        return AccessoryRouteTable.shared.route(for: url) != nil
    }

    /// The canonical form of `request` (FoundationNetworking never calls this; the protocol
    /// applies the same canonicalisation itself when it starts loading).
    open override class func canonicalRequest(for request: URLRequest) -> URLRequest {
        CanonicalRequest.make(request)
    }

    /// Whether `a` and `b` have the same canonical URL (scheme and host lowercased, an empty path
    /// made `/`); the method and headers are not compared.
    open override class func requestIsCacheEquivalent(_ a: URLRequest, to b: URLRequest) -> Bool {
        CanonicalRequest.make(a).url == CanonicalRequest.make(b).url
    }

    /// Marks `request` so that no ``AccessoryURLProtocol`` claims it (for code that forwards
    /// a request it received back into URLSession). The mark is a header, so it survives the
    /// copies FoundationNetworking makes; it is never sent to an accessory.
    public static func markedAsHandled(_ request: URLRequest) -> URLRequest {
        var marked = request
        marked.setValue("1", forHTTPHeaderField: RequestPlan.handledHeader)
        return marked
    }

    /// Called by URLSession on the task's work queue to start the load: the response comes from
    /// ``AccessoryRouteTable/cache`` or over the route's link, or the task fails at once (a download
    /// task, an upload body FoundationNetworking does not pass on, no route for the URL, an
    /// `accessorys://` URL on a route without TLS). Later calls, made to wake the work queue, deliver
    /// the events that have arrived.
    open override func startLoading() {
        // Runs on the task's work queue: either the first start, or a wake (see LoadingBox).
        switch self.box.currentPhase {
        case .idle:
            self.begin()
        case .loading:
            self.deliverPendingEvents()
        case .done, .stopped:
            return
        }
    }

    /// Called by URLSession when the task is cancelled or its session invalidated: stops the load.
    /// A call while the task is still running or suspended (a wake, or the app's `suspend()`) is
    /// ignored, and loading goes on.
    open override func stopLoading() {
        // Also on the work queue. A cancellation (or invalidation) sets the task's state to
        // canceling before the session calls this; a wake or the app's suspend() leaves it
        // running or suspended, and loading goes on in the background.
        switch self.task?.state {
        case .running?, .suspended?:
            return
        default:
            self.box.stop()
        }
    }

    // MARK: Work queue only

    private func begin() {
        guard let task = self.task else {
            self.failAtOnce(AccessoryURLProtocolError(.invalidRequest, "the protocol was created without a task"))
            return
        }
        if task is URLSessionDownloadTask {
            self.failAtOnce(
                AccessoryURLProtocolError(
                    .downloadNotSupported,
                    "download tasks cannot complete through a custom URLProtocol on Linux (FoundationNetworking crashes); use AccessoryClient.download(_:to:progress:), or a data task"
                )
            )
            return
        }
        let request = self.request
        if task is URLSessionUploadTask && request.httpBody == nil && request.httpBodyStream == nil {
            self.failAtOnce(
                AccessoryURLProtocolError(
                    .uploadBodyNotSupported,
                    "FoundationNetworking does not pass the body of uploadTask(with:from:) or uploadTask(with:fromFile:) to a custom URLProtocol on Linux, so nothing would be sent; use a data task with httpBody or httpBodyStream, or AccessoryClient.upload(_:fromFile:)"
                )
            )
            return
        }
        guard let url = request.url, let route = AccessoryRouteTable.shared.route(for: url) else {
            self.failAtOnce(
                AccessoryURLProtocolError(
                    .routeUnavailable,
                    "no accessory route serves \(request.url?.absoluteString ?? "the request")"
                )
            )
            return
        }
        if url.scheme?.lowercased() == Self.secureScheme && !route.isSecure {
            self.failAtOnce(
                AccessoryURLProtocolError(
                    .tlsNotConfigured,
                    "\(url.absoluteString) asks for TLS, but the route \(route.name) has none; set its `tls` configuration (or give it a TLSTransport), or use accessory://"
                )
            )
            return
        }
        let session = SessionIntrospection.session(of: task)
        let delivery = session.flatMap { SessionIntrospection.delivery(of: task, in: $0) } ?? .completionHandler
        let plan: RequestPlan
        let client: AccessoryClient
        do {
            plan = try RequestPlan(request, route: route, configuration: session?.configuration, delivery: delivery)
            client = try AccessoryRouteTable.shared.client(for: route)
        } catch {
            self.failAtOnce(error)
            return
        }
        let exchange = Exchange(
            box: self.box,
            client: client,
            plan: plan,
            cache: AccessoryRouteTable.shared.cache
        )
        _ = self.box.start(task: task) {
            Task { await exchange.run() }
        }
    }

    private func failAtOnce(_ error: any Error) {
        guard self.box.finishBeforeStart() else { return }
        self.client?.urlProtocol(self, didFailWithError: error)
    }

    private func deliverPendingEvents() {
        // A task that is cancelling will get stopLoading() next and completes with
        // URLError(.cancelled): its client must not be called any more.
        if let state = self.task?.state, state == .canceling || state == .completed { return }
        guard let events = self.box.takeEvents() else { return }
        for event in events {
            switch event {
            case .response(let response):
                // The protocol caches by itself; the session is told not to (it would not anyway).
                self.client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
            case .data(let data):
                self.client?.urlProtocol(self, didLoad: data)
            case .finished:
                self.box.markDone()
                self.client?.urlProtocolDidFinishLoading(self)
                return
            case .failed(let error):
                self.box.markDone()
                self.client?.urlProtocol(self, didFailWithError: error)
                return
            }
        }
    }
}
