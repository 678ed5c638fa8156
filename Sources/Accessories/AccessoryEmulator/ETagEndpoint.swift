import AccessoryResponder
import HTTPTypes

/// `/etag`: a cacheable resource with a fixed entity tag and modification date, answering
/// conditional requests with `304 Not Modified` (RFC 9110 §13).
enum ETagEndpoint {
    static let entityTag = "\"emu-etag-1\""
    /// 2025-01-01T00:00:00Z.
    static let lastModifiedSeconds = 1_735_689_600
    static let lastModified = IMFFixdate.format(lastModifiedSeconds)

    static func respond(to head: HTTPRequest) -> ResponderResponse {
        let fields: HTTPFields = [
            .eTag: Self.entityTag,
            .lastModified: Self.lastModified,
            .cacheControl: "max-age=60",
        ]
        if Self.isNotModified(head) {
            return ResponderResponse(status: .notModified, headerFields: fields)
        }
        return EmulatorResponses.json(
            ["etag": Self.entityTag, "lastModified": Self.lastModified],
            headerFields: fields
        )
    }

    /// If-None-Match wins over If-Modified-Since when both are present (RFC 9110 §13.2.2).
    static func isNotModified(_ head: HTTPRequest) -> Bool {
        let noneMatch = head.headerFields[values: .ifNoneMatch]
        if !noneMatch.isEmpty {
            let ours = Self.opaqueTag(Self.entityTag)
            for value in noneMatch {
                for candidate in value.split(separator: ",") {
                    let tag = candidate.trimmingCharacters()
                    if tag == "*" || Self.opaqueTag(tag) == ours { return true }  // weak comparison
                }
            }
            return false
        }
        if let since = head.headerFields[.ifModifiedSince], let seconds = IMFFixdate.parse(since) {
            return seconds >= Self.lastModifiedSeconds
        }
        return false
    }

    /// The tag without its weakness indicator, for weak comparison.
    private static func opaqueTag<S: StringProtocol>(_ tag: S) -> Substring {
        let text = Substring(tag)
        return text.hasPrefix("W/") ? text.dropFirst(2) : text
    }
}

extension Substring {
    fileprivate func trimmingCharacters() -> Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result.removeFirst() }
        while let last = result.last, last == " " || last == "\t" { result.removeLast() }
        return result
    }
}
