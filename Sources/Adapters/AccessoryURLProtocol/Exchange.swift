import AccessoryClient
import AccessoryHTTP1
import Foundation
import HTTPTypes
import NIOCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One load of an ``AccessoryURLProtocol``: cache lookup, the request over the route's client
/// (which follows redirects and answers authentication itself), timeouts, body delivery and
/// cache storage. It never touches the protocol or its client: it posts events to the box.
struct Exchange: Sendable {
    let box: LoadingBox
    let client: AccessoryClient
    let plan: RequestPlan
    let cache: AccessoryResponseCache?

    private struct TimeoutExpired: Error {
        let message: String
    }

    func run() async {
        do {
            try await self.runWithTimeouts()
        } catch let expired as TimeoutExpired {
            self.box.post(.failed(URLErrorMapping.timedOut(self.plan.url, expired.message)))
        } catch {
            self.box.post(.failed(URLErrorMapping.urlError(for: error, url: self.plan.url)))
        }
    }

    private func runWithTimeouts() async throws {
        guard self.plan.idleTimeout != nil || self.plan.resourceTimeout != nil else {
            try await self.load()
            return
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.load() }
            group.addTask {
                do {
                    try await self.watchdog()
                } catch let expired as TimeoutExpired {
                    // Reported at once: the exchange may take a while to unwind (a request
                    // still queued behind another on the link, a drain), and the group waits
                    // for it. Anything it posts afterwards comes after this terminal event.
                    self.box.post(.failed(URLErrorMapping.timedOut(self.plan.url, expired.message)))
                    throw expired
                }
            }
            defer { group.cancelAll() }
            _ = try await group.next()
        }
    }

    /// Throws ``TimeoutExpired`` when the accessory stays silent longer than the idle timeout or
    /// the whole load exceeds the resource timeout; ends with `CancellationError` otherwise.
    private func watchdog() async throws {
        let started = ContinuousClock.now
        let resourceDeadline = self.plan.resourceTimeout.map { started.advanced(by: $0) }
        while true {
            let now = ContinuousClock.now
            if let resourceDeadline, now >= resourceDeadline {
                throw TimeoutExpired(message: "the load did not finish within the resource timeout")
            }
            var next = resourceDeadline
            if let idle = self.plan.idleTimeout {
                let idleDeadline = self.box.lastActivityInstant.advanced(by: idle)
                if now >= idleDeadline {
                    throw TimeoutExpired(message: "the accessory sent nothing within the request timeout")
                }
                next = min(next ?? idleDeadline, idleDeadline)
            }
            guard let next else { return }
            try await Task.sleep(until: next, clock: .continuous)
        }
    }

    private func load() async throws {
        var request = self.plan.request
        var revalidating: AccessoryResponseCache.Entry?
        if let cache = self.cache, self.plan.cacheable {
            let entry = cache.lookup(self.plan.url)
            switch self.plan.cachePolicy {
            case .returnCacheDataElseLoad:
                if let entry { return self.deliverCached(entry) }
            case .returnCacheDataDontLoad:
                if let entry { return self.deliverCached(entry) }
                throw URLError(
                    .resourceUnavailable,
                    userInfo: [
                        NSLocalizedDescriptionKey: "the response is not cached and the cache policy forbids loading it",
                        NSURLErrorFailingURLErrorKey: self.plan.url,
                    ]
                )
            case .reloadIgnoringLocalCacheData, .reloadIgnoringLocalAndRemoteCacheData:
                break
            default:  // .useProtocolCachePolicy, .reloadRevalidatingCacheData
                if let entry {
                    if self.plan.cachePolicy == .useProtocolCachePolicy && ResponseCache.isFresh(entry) {
                        return self.deliverCached(entry)
                    }
                    let validators = ResponseCache.validators(for: entry)
                    if !validators.isEmpty {
                        revalidating = entry
                        for (name, value) in validators {
                            if let fieldName = HTTPField.Name(name) { request.headerFields[fieldName] = value }
                        }
                    }
                }
            }
        } else if self.plan.cachePolicy == .returnCacheDataDontLoad {
            throw URLError(
                .resourceUnavailable,
                userInfo: [
                    NSLocalizedDescriptionKey:
                        "caching is off for this request and the cache policy forbids loading it",
                    NSURLErrorFailingURLErrorKey: self.plan.url,
                ]
            )
        }
        let revalidated = revalidating
        self.box.touch()
        try await self.client.execute(request) { response in
            self.box.touch()
            if let revalidated, response.status.code == 304 {
                // Not modified: the cached response is delivered and its freshness renewed.
                self.cache?.store(revalidated.response, data: revalidated.data, for: self.plan.url)
                return self.deliverCached(revalidated)
            }
            guard let urlResponse = self.plan.makeResponse(response.head, path: response.path) else {
                throw URLError(.badServerResponse)
            }
            try await self.deliver(urlResponse, body: response.body)
        }
    }

    private func deliver(_ response: HTTPURLResponse, body: HTTPResponseBody) async throws {
        var storagePolicy = URLCache.StoragePolicy.notAllowed
        if self.cache != nil && self.plan.cacheable {
            var request = URLRequest(url: self.plan.url)
            request.setValue(self.plan.requestCacheControl, forHTTPHeaderField: "Cache-Control")
            storagePolicy = CacheStoragePolicy.policy(for: request, response: response, secure: self.plan.secure)
        }
        var kept: Data? = storagePolicy == .notAllowed ? nil : Data()
        switch self.plan.delivery {
        case .completionHandler:
            // Completion handlers keep only the last didLoad chunk: the body goes in one piece.
            var whole = Data()
            for try await buffer in body {
                self.box.touch()
                guard whole.count + buffer.readableBytes <= self.plan.maxBufferedBodySize else {
                    throw URLError(
                        .dataLengthExceedsMaximum,
                        userInfo: [
                            NSLocalizedDescriptionKey:
                                "the body is larger than the route's maxBufferedBodySize (\(self.plan.maxBufferedBodySize) bytes); use a delegate-based data task to stream it",
                            NSURLErrorFailingURLErrorKey: self.plan.url,
                        ]
                    )
                }
                whole.append(contentsOf: buffer.readableBytesView)
            }
            kept = kept == nil ? nil : whole
            self.box.post(whole.isEmpty ? [.response(response)] : [.response(response), .data(whole)])
        case .delegate:
            self.box.post(.response(response))
            // The cache refuses a body larger than its capacity, so a copy is kept only up to
            // that (and never past maxBufferedBodySize): a large streamed body is not held
            // twice for a store that would be refused.
            let keepLimit = min(self.plan.maxBufferedBodySize, self.cache?.capacity ?? 0)
            if response.expectedContentLength > Int64(keepLimit) { kept = nil }
            for try await buffer in body {
                let chunk = Data(buffer.readableBytesView)
                if kept != nil {
                    kept?.append(chunk)
                    if (kept?.count ?? 0) > keepLimit { kept = nil }
                }
                self.box.post(.data(chunk))
                await self.box.waitForSpace()
                try Task.checkCancellation()
            }
        }
        if let kept, let cache = self.cache {
            cache.store(response, data: kept, for: self.plan.url)
        }
        self.box.post(.finished)
    }

    private func deliverCached(_ entry: AccessoryResponseCache.Entry) {
        var events: [LoadingEvent] = [.response(entry.response)]
        if !entry.data.isEmpty { events.append(.data(entry.data)) }
        events.append(.finished)
        self.box.post(events)
    }
}
